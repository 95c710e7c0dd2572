def add(a, b, n):
    return a + b
