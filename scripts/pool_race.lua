-- wrk script for scripts/pool_race.py: synchronized bursts and pauses.
-- Every wrk process computes the same schedule from RACE_START_MS (wall
-- clock, ms) and RACE_SEED: bursts of RACE_BURST_MS, then a pause drawn in
-- [RACE_PAUSE_MIN_MS, RACE_PAUSE_MAX_MS]; delay() holds each request until
-- the next burst, so the pooled upstream connections sit idle together.
-- RACE_METHOD=POST sends `a=1` bodies. done() prints one line:
--   RACE s2xx=N s502=N s503=N s504=N s5xx_other=N other=N
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } race_timespec;
int clock_gettime(int clk, race_timespec *ts);
]]
local ts = ffi.new("race_timespec")
local function now_ms()
  ffi.C.clock_gettime(0, ts)
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local start = tonumber(os.getenv("RACE_START_MS") or "0")
local burst = tonumber(os.getenv("RACE_BURST_MS") or "700")
local pmin = tonumber(os.getenv("RACE_PAUSE_MIN_MS") or "300")
local pmax = tonumber(os.getenv("RACE_PAUSE_MAX_MS") or "3000")
local x = tonumber(os.getenv("RACE_SEED") or "1")
local starts = {}
local t = start
for i = 1, 20000 do
  starts[i] = t
  x = (x * 16807) % 2147483647
  t = t + burst + pmin + (x % (pmax - pmin + 1))
end
local idx = 1

if os.getenv("RACE_METHOD") == "POST" then
  wrk.method = "POST"
  wrk.body = "a=1"
  wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
end

function delay()
  local now = now_ms()
  while starts[idx + 1] and starts[idx + 1] <= now do idx = idx + 1 end
  local s = starts[idx]
  if now < s then return math.ceil(s - now) end
  if now < s + burst then return 0 end
  if starts[idx + 1] then return math.ceil(starts[idx + 1] - now) end
  return 1000
end

local counts = { s2xx = 0, s502 = 0, s503 = 0, s504 = 0, s5xx_other = 0, other = 0 }
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function response(status, headers, body)
  if status >= 200 and status < 300 then counts.s2xx = counts.s2xx + 1
  elseif status == 502 then counts.s502 = counts.s502 + 1
  elseif status == 503 then counts.s503 = counts.s503 + 1
  elseif status == 504 then counts.s504 = counts.s504 + 1
  elseif status >= 500 then counts.s5xx_other = counts.s5xx_other + 1
  else counts.other = counts.other + 1 end
end

function done(summary, latency, requests)
  local total = {}
  for _, th in ipairs(threads) do
    local c = th:get("counts")
    for k, v in pairs(c) do total[k] = (total[k] or 0) + v end
  end
  io.write(string.format("RACE s2xx=%d s502=%d s503=%d s504=%d s5xx_other=%d other=%d\n",
    total.s2xx or 0, total.s502 or 0, total.s503 or 0, total.s504 or 0,
    total.s5xx_other or 0, total.other or 0))
end
