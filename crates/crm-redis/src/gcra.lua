-- GCRA over one key, atomic in Redis: the same algorithm as the in-process limiter (governor).
-- KEYS[1]: the budget's key. ARGV[1]: emission interval (µs, 60 s / limit). ARGV[2]: burst.
-- The key holds the theoretical arrival time (TAT) in µs of Redis's own clock, so every server
-- process reads one clock. Returns {allowed, remaining, reset_us, retry_after_us}.
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat or tat < now then
  tat = now
end
local capacity = interval * burst
local new_tat = tat + interval
if new_tat - now > capacity then
  return {0, 0, tat - now, new_tat - now - capacity}
end
-- '%.0f': a plain tostring would print 1.7e+15 and lose the microseconds.
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
return {1, math.floor((capacity - (new_tat - now)) / interval), new_tat - now, 0}
