-- wrk script: POST /v1/batch with 100 new events a request (unique messageIds, users spread over USERS).
-- Events carry no timestamp: the service stamps them on arrival.
local users = tonumber(os.getenv("BENCH_USERS") or "10000")
local key = os.getenv("BENCH_KEY") or "bench-key"
-- An app's analytics mix: one event in ten is an app open (which the onboarding rules act on), the rest are the
-- screens and taps that most events are.
local names = { "Application Opened", "Product Viewed", "Button Tapped", "Product Viewed", "Search Performed",
  "Product Viewed", "Button Tapped", "Cart Viewed", "Product Viewed", "Button Tapped" }
local thread_id = 0
local counter = 0
-- Each run's messageIds are its own: a warm-up run and the measured one after it (or two runs at once, against two
-- ports) would otherwise send the same ids and the same users, and the later run's events would be duplicates.
local run = os.time() .. "-" .. (wrk.port or "")

function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
end

function init(args)
  math.randomseed(tid * 7919)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Basic " .. (os.getenv("BENCH_AUTH") or "")
end

function request()
  local parts = {}
  for i = 1, 100 do
    counter = counter + 1
    local u = math.random(users)
    parts[i] = string.format(
      '{"type":"track","userId":"u%d","event":"%s","messageId":"w%s-%d-%d","properties":{"url":"https://example.com/?utm_source=facebook&fbclid=x%d"},"context":{"os":{"name":"iOS"},"locale":"en_US"}}',
      u, names[(counter % #names) + 1], run, tid, counter, counter)
  end
  return wrk.format(nil, "/v1/batch", nil, '{"batch":[' .. table.concat(parts, ",") .. ']}')
end
