-- wrk script: each wrk thread owns one key and one connection and alternates acquire and
-- release on it, so the cycle is strictly ordered; every request carries a fresh request id.
--   wrk -t16 -c16 -d5s -s bench/cycle.lua URL -- ANON_KEY SERVICE_KEY RUN_NONCE
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  anon, service, nonce = args[1], args[2], tonumber(args[3])
  key = "wrk-" .. tid
  token = string.format("%08x-%04x-4000-8000-000000000000", nonce % 0xffffffff, tid)
  acquire_body = '{"token":"' .. token .. '","ttl":30}'
  release_body = '{"token":"' .. token .. '"}'
  counter, phase = 0, 0
end

function request()
  counter = counter + 1
  local headers = {
    ["apikey"] = anon,
    ["Authorization"] = "Bearer " .. service,
    ["Content-Type"] = "application/json",
    ["X-Request-Id"] = string.format("%08x-%04x-4000-8000-%012x", nonce % 0xffffffff, tid, counter),
  }
  if phase == 0 then
    phase = 1
    return wrk.format("POST", "/locks/v1/locks/" .. key .. "/acquire", headers, acquire_body)
  end
  phase = 0
  return wrk.format("POST", "/locks/v1/locks/" .. key .. "/release", headers, release_body)
end
