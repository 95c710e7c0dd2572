"""The CPU model of a Cambricon MLU: BANG C builds (capacity-checked per generation), the model's worker and calls."""
