-- Headless Neovim 0.7 as a real LSP client of the Xpiler server:
-- open a .cu, wait for diagnostics, run "Translate to HIP" through vim.lsp.buf.code_action (the same path
-- a user's menu choice takes), wait for the job, save the created .hip buffer and report as JSON.
-- Inputs (environment): XPILER_PYTHON, XPILER_SOURCE, XPILER_REPORT, optional XPILER_EXPECT_CODE (a diagnostic
-- code prefix to wait for). Always ends with :qa!.

local report = { diagnostics = {}, diagnostics_received = false, actions = {}, messages = {}, jobs = {} }
local python = os.getenv("XPILER_PYTHON")
local source = os.getenv("XPILER_SOURCE")
local report_path = os.getenv("XPILER_REPORT")

local function write_report()
  local file = io.open(report_path, "w")
  file:write(vim.json.encode(report))
  file:close()
end

local function run()
  local source_uri = vim.uri_from_fname(source)
  local default_diagnostics = vim.lsp.handlers["textDocument/publishDiagnostics"]
  local client_id = vim.lsp.start_client({
    cmd = { python, "-m", "xpiler_server" },
    root_dir = vim.fn.fnamemodify(source, ":h"),
    init_options = { target = "hip", diagnostics = { debounceMs = 10 } },
    handlers = {
      -- 0.7's vim.diagnostic.get loses the LSP code/range: keep the raw params too.
      ["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
        if result and result.uri == source_uri then
          report.diagnostics_received = true
          report.diagnostics = result.diagnostics
        end
        return default_diagnostics(err, result, ctx, config)
      end,
      ["xpiler/jobFinished"] = function(_, result)
        table.insert(report.jobs, result)
      end,
      ["window/showMessage"] = function(_, result)
        table.insert(report.messages, result.message)
      end,
    },
  })
  assert(client_id, "the server did not start")
  vim.cmd("edit " .. vim.fn.fnameescape(source))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(bufnr, client_id)
  assert(vim.wait(30000, function() return report.diagnostics_received end, 50), "no diagnostics within 30 s")
  if os.getenv("XPILER_EXPECT_CODE") then
    -- Some diagnostics (the target's warp-size hazards) come once edits pause: wait for the expected code.
    local wanted = os.getenv("XPILER_EXPECT_CODE")
    assert(vim.wait(30000, function()
      for _, d in ipairs(report.diagnostics) do
        if type(d.code) == "string" and d.code:sub(1, #wanted) == wanted then return true end
      end
      return false
    end, 50), "no diagnostic with code " .. wanted)
  end

  -- Cursor inside the first kernel, then the user's code-action menu, answered by choosing the item.
  local kernel_line = vim.fn.search("__global__", "nw")
  vim.api.nvim_win_set_cursor(0, { math.max(kernel_line, 1) + 1, 4 })
  vim.ui.select = function(items, opts, on_choice)
    local chosen = nil
    for _, item in ipairs(items) do
      local title = opts.format_item(item)
      table.insert(report.actions, title)
      if title == "Translate to HIP" then chosen = item end
    end
    report.menu_shown = true
    report.chosen = chosen ~= nil
    on_choice(chosen)
  end
  vim.lsp.buf.code_action({ only = { "source" } })
  assert(vim.wait(20000, function() return report.menu_shown end, 50), "no code-action menu within 20 s")
  assert(report.chosen, "no 'Translate to HIP' among the code actions")
  assert(vim.wait(150000, function() return #report.jobs > 0 end, 100), "the translation job did not finish")
  report.job = report.jobs[1]

  -- The server created the file through workspace/applyEdit: find its buffer, save it.
  local created = nil
  assert(vim.wait(10000, function()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      local name = vim.api.nvim_buf_get_name(buf)
      if name:match("%.hip$") and vim.api.nvim_buf_line_count(buf) > 1 then created = buf return true end
    end
    return false
  end, 50), "no .hip buffer was created")
  report.hip_path = vim.api.nvim_buf_get_name(created)
  vim.api.nvim_buf_call(created, function() vim.cmd("silent write!") end)
  vim.lsp.stop_client(client_id)
end

local ok, err = pcall(run)
report.ok = ok
report.error = ok and nil or tostring(err)
write_report()
vim.cmd("qa!")
