-- take.lua is redisstore's only script: the six algorithms of
-- rules/algorithm.go, ported function by function, and one rules.Store call
-- over the keys of one hash slot, atomically (Redis runs a script alone).
--
-- Mode 0 (take) is Store.Take: pass 1 checks every op against the state
-- before the call (rules.Check), the call is refused when an enforcing take
-- is not allowed (rules.Refused), and pass 2 settles every op
-- (rules.Settle: consume per the contract, report the state after, store it
-- with its TTL). Mode 1 (undo) gives back what a take of a cross-slot call
-- consumed in this slot when another slot refused the request (doc.go).
--
-- Numbers. Lua numbers are doubles, exact for integers up to 2^53;
-- rules.ValidateLimits keeps every intermediate value of every algorithm
-- within that (rules.MaxExact) for clocks under 2^52us, so this script and
-- Go compute the same integers. Integer division truncates toward zero as
-- Go's does: idiv derives it from math.fmod, which is exact, rather than
-- from math.floor(a / b), whose rounded quotient can be one off. Numbers go
-- to Redis commands through str (%.0f): Lua's tostring keeps 14 digits, and
-- a timestamp in microseconds has 16.
--
-- Keys. Each op's key holds a string "alg:x:at:n:prev": rules.State's
-- fields and x, the expiry (us) the state was written with. A state at or
-- past x reads as fresh whatever Redis' own expiry says (in caller-clock
-- mode Redis expires on another clock than the one deciding). A
-- sliding_log op has a second key, a sorted set beside the string in the
-- same hash slot: its timestamps as scores, members "ts-seq" (unique when
-- two fall in one microsecond); its string is then the log's meta, with n
-- the last seq used.
--
-- ARGV[1] holds integers separated by spaces: mode + 2*flag (the flag, in
-- a take: return undo payloads; in an undo: read TIME for the refund), now
-- (-1: read TIME), the slack in ms added to every Redis TTL (caller-clock
-- mode), then per op: kind + 8*algorithm + 64*enforce + 128*attempts,
-- limit, burst, period (us), cost, and in undo mode the number of payload
-- strings the op has in ARGV[2..].
--
-- Cost. Redis runs the whole chunk on every call, so every function below
-- is a closure created (and collected) per call, and every number crossing
-- a string costs a conversion: the hot path keeps both few. The undo
-- mode's functions are created only in that mode, the sliding_log's only
-- when an op needs them.
--
-- A take returns {now, then per op: allowed (0/1), remaining,
-- reset_after_us, retry_after_us (-1: never)}, then with the flag one
-- payload per op: 0, or the strings an undo needs (what the key holds when
-- no unit is taken, what this call wrote, the sliding_log members added,
-- the member/score pairs dropped). An undo returns {remaining,
-- reset_after_us} per op.

local GCRA, TOKEN, LEAKY, FIXED, SLIDING, LOG = 0, 1, 2, 3, 4, 5
local TAKE, PEEK, ADD, REFUND, RESET = 0, 1, 2, 3, 4

local call = redis.call
local fmod, max, min = math.fmod, math.max, math.min

if redis.replicate_commands then
	redis.replicate_commands() -- Redis < 5: replicate the writes, not the script (it reads TIME)
end

-- idiv is Go's a / b for integers: truncated toward zero, exact.
local function idiv(a, b)
	return (a - fmod(a, b)) / b
end

-- ceildiv is rules' ceilDiv: ceil(a/b) for b > 0, and 0 for a <= 0.
local function ceildiv(a, b)
	if a <= 0 then
		return 0
	end
	return idiv(a + b - 1, b)
end

local function str(x)
	return string.format('%.0f', x)
end

local h = {}
for w in string.gmatch(ARGV[1], '%S+') do
	h[#h + 1] = tonumber(w)
end
local mode, flag = h[1] % 2, h[1] >= 2
local now, slack = h[2], h[3]

-- The ops, and their keys: a sliding_log op has two.
local ops, hasLog = {}, false
do
	local width, kc = 5, 1
	if mode == 1 then
		width = 6
	end
	for i = 4, #h, width do
		local code = h[i]
		local op = {
			kind = code % 8, alg = (code - code % 8) / 8 % 8, enforce = code % 128 >= 64, attempts = code >= 128,
			limit = h[i + 1], burst = h[i + 2], period = h[i + 3], cost = h[i + 4], m = h[i + 5],
			key = KEYS[kc],
		}
		kc = kc + 1
		if op.alg == LOG then
			op.lk = KEYS[kc]
			kc = kc + 1
			hasLog = true
		end
		ops[#ops + 1] = op
	end
end

-- State ---------------------------------------------------------------------

-- The sliding_log's functions, defined only when an op needs them.
local logCount, logNewest, zcall, consumeLog, reportLog

local function fresh()
	return { alg = 0, x = 0, at = 0, n = 0, prev = 0 }
end

-- time reads the server's clock (us).
local function time()
	local t = call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function decode(raw)
	if not raw or raw == '' then
		return nil
	end
	local a, x, at, n, p = string.match(raw, '^(%d+):(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+)$')
	if not a then
		return nil
	end
	return { alg = tonumber(a), x = tonumber(x), at = tonumber(at), n = tonumber(n), prev = tonumber(p) }
end

-- load returns the state of key at t (fresh when missing, unreadable or
-- expired) and the raw value (false when missing).
local function load(key, t)
	local raw = call('GET', key)
	local st = decode(raw)
	if st == nil or t >= st.x then
		st = fresh()
	end
	return st, raw
end

-- The ...At helpers of rules/algorithm.go: st read as of t for op's
-- algorithm; a state of another algorithm reads as fresh.

local function stamp(st, op)
	if st.alg ~= op.alg then
		return 0
	end
	return st.at
end

local function skew(st, t, op)
	return max(stamp(st, op) - t, 0)
end

local function tokensAt(st, t, op)
	local cap = op.burst * op.period
	if st.alg ~= op.alg then
		return cap
	end
	local tokens = min(st.n, cap)
	local elapsed = t - st.at
	if elapsed <= 0 then
		return tokens
	end
	if elapsed > idiv(cap - tokens, op.limit) then
		return cap
	end
	return tokens + elapsed * op.limit
end

local function levelAt(st, t, op)
	if st.alg ~= op.alg then
		return 0
	end
	local level = st.n
	local elapsed = t - st.at
	if elapsed <= 0 then
		return level
	end
	if elapsed > idiv(level, op.limit) then
		return 0
	end
	return level - elapsed * op.limit
end

local function windowStart(t, p)
	local r = fmod(t, p)
	if r < 0 then
		r = r + p
	end
	return t - r
end

local function fixedAt(st, t, op)
	local start = windowStart(t, op.period)
	if st.alg ~= op.alg or st.at < start then
		return start, 0
	end
	return st.at, st.n
end

local function slidingAt(st, t, op)
	local start = windowStart(t, op.period)
	if st.alg ~= op.alg or st.at < start - op.period then
		return start, 0, 0
	end
	if st.at < start then
		return start, st.n, 0
	end
	return st.at, st.prev, st.n
end

if hasLog then
	-- The log's timestamps in the window at t are those > t - period.
	function logCount(st, t, op)
		if st.alg ~= LOG then
			return 0
		end
		return call('ZCOUNT', op.lk, str(t - op.period + 1), '+inf')
	end

	function logNewest(op)
		local r = call('ZRANGE', op.lk, '-1', '-1', 'WITHSCORES')
		return tonumber(r[2])
	end

	-- zcall runs cmd on op's log with args in chunks (Lua's unpack has a
	-- stack limit), returning the sum of the integer replies.
	function zcall(cmd, op, args)
		local total, i = 0, 1
		while i <= #args do
			local chunk = { cmd, op.lk }
			for j = i, min(i + 255, #args) do
				chunk[#chunk + 1] = args[j]
			end
			i = i + 256
			total = total + call(unpack(chunk))
		end
		return total
	end
end

-- Check ---------------------------------------------------------------------

local function slidingWait(st, t, op, cost)
	local p = op.period
	local start, prev, cur = slidingAt(st, t, op)
	local e = max(t - start, 0)
	local room = op.limit - cur - cost
	if room >= 0 then
		if prev * (p - e) <= room * p then
			return 0
		end
		return start + p - idiv(room * p, prev) - t
	end
	return start + 2 * p - idiv((op.limit - cost) * p, cur) - t
end

-- check is rules.Check: whether a take of the op's cost fits, the us until
-- it does (0 now, -1 never), and for a sliding_log the timestamps in the
-- window (for report).
local function check(st, t, op)
	if op.kind == REFUND or op.kind == RESET then
		return true, 0, 0
	end
	local cost = max(op.cost, 0)
	local wait, count = 0, 0
	local a = op.alg
	if a == GCRA then
		if cost > op.burst then
			wait = -1
		else
			local T = idiv(op.period, op.limit)
			local tat = max(stamp(st, op), t)
			wait = max(tat + cost * T - t - op.burst * T, 0)
		end
	elseif a == TOKEN then
		if cost > op.burst then
			wait = -1
		else
			local need = cost * op.period - tokensAt(st, t, op)
			if need > 0 then
				wait = skew(st, t, op) + ceildiv(need, op.limit)
			end
		end
	elseif a == LEAKY then
		if cost > op.burst then
			wait = -1
		else
			local excess = levelAt(st, t, op) + cost * op.period - op.burst * op.period
			if excess > 0 then
				wait = skew(st, t, op) + ceildiv(excess, op.limit)
			end
		end
	elseif a == FIXED then
		if cost > op.limit then
			wait = -1
		else
			local start, n = fixedAt(st, t, op)
			if n + cost > op.limit then
				wait = start + op.period - t
			end
		end
	elseif a == SLIDING then
		if cost > op.limit then
			wait = -1
		else
			wait = slidingWait(st, t, op, cost)
		end
	elseif a == LOG then
		count = logCount(st, t, op)
		if cost > op.limit then
			wait = -1
		else
			local k = count + cost - op.limit
			if k > 0 then
				-- The k oldest timestamps in the window must leave it.
				local r = call('ZRANGEBYSCORE', op.lk, str(t - op.period + 1), '+inf', 'WITHSCORES', 'LIMIT', str(k - 1), '1')
				wait = tonumber(r[2]) + op.period - t
			end
		end
	else
		wait = -1
	end
	if wait < 0 then
		wait = -1
	end
	return wait == 0, wait, count
end

-- Consume -------------------------------------------------------------------

local function consumeCount(n, op, cost)
	if op.kind == TAKE then
		return min(n + min(cost, op.limit + 1), max(n, op.limit))
	elseif op.kind == ADD then
		return min(n + min(cost, 2 * op.limit), max(n, 2 * op.limit))
	elseif op.kind == REFUND then
		return max(n - cost, 0)
	end
	return n
end

if hasLog then
	-- consumeLog is rules' consumeLog on the sorted set. It returns the
	-- timestamps left (all in the window) and the newest. u, when given,
	-- collects what an undo needs: the members added and the entries dropped.
	function consumeLog(st, t, op, cost, u)
		local n, seq = 0, 0
		if st.alg == LOG then
			seq = st.n
			-- Drop what has left the window, then anything beyond the newest
			-- Limit (a limit lowered by a reload).
			local cut = str(t - op.period)
			if u then
				local old = call('ZRANGEBYSCORE', op.lk, '-inf', cut, 'WITHSCORES')
				for j = 1, #old do
					u.removed[#u.removed + 1] = old[j]
				end
			end
			call('ZREMRANGEBYSCORE', op.lk, '-inf', cut)
			n = call('ZCARD', op.lk)
			if n > op.limit then
				if u then
					local old = call('ZRANGE', op.lk, '0', str(n - op.limit - 1), 'WITHSCORES')
					for j = 1, #old do
						u.removed[#u.removed + 1] = old[j]
					end
				end
				call('ZREMRANGEBYRANK', op.lk, '0', str(n - op.limit - 1))
				n = op.limit
			end
		else
			call('DEL', op.lk) -- another algorithm's, or expired: start afresh
		end
		local newest = 0
		if op.kind == TAKE or op.kind == ADD then
			local c = min(cost, op.limit)
			local drop = n + c - op.limit
			if drop > 0 then
				call('ZREMRANGEBYRANK', op.lk, '0', str(drop - 1))
				n = n - drop
			end
			-- Timestamps stay ascending even when the clock stepped back.
			local ts, top = t, 0
			if n > 0 then
				top = logNewest(op)
				ts = max(ts, top)
			end
			local args = {}
			for j = 1, c do
				local m = str(ts) .. '-' .. str(seq + j)
				args[#args + 1] = str(ts)
				args[#args + 1] = m
				if u then
					u.added[#u.added + 1] = m
				end
			end
			zcall('ZADD', op, args)
			seq = seq + c
			n = n + c
			if c > 0 then
				newest = ts
			else
				newest = top
			end
		elseif op.kind == REFUND then
			-- Give back the newest units: most likely this request's own.
			local k = min(cost, n)
			if k > 0 then
				call('ZREMRANGEBYRANK', op.lk, str(-k), '-1')
				n = n - k
			end
			if n > 0 then
				newest = logNewest(op)
			end
		end
		-- Every write changes the meta (seq + 1), so an undo can tell whether
		-- anything wrote the log after it.
		st.n = seq + 1
		return n, newest
	end
end

-- consume is rules.Consume. It returns, for a sliding_log, the timestamps
-- left and the newest.
local function consume(st, t, op, u)
	if op.kind == RESET then
		st.alg, st.at, st.n, st.prev = 0, 0, 0, 0
		if op.alg == LOG then
			call('DEL', op.lk)
		end
		return 0, 0
	end
	local cost = max(op.cost, 0)
	local a = op.alg
	local count, newest = 0, 0
	if a == GCRA then
		local T = idiv(op.period, op.limit)
		local tol = op.burst * T
		local tat = stamp(st, op)
		local base = max(tat, t)
		if op.kind == TAKE then
			if cost <= op.burst and base + cost * T - t <= tol then
				tat = base + cost * T
			else
				tat = max(tat, t + tol) -- full, never lowered
			end
		elseif op.kind == ADD then
			tat = max(tat, min(base + min(cost, 2 * op.burst) * T, t + 2 * tol))
		elseif op.kind == REFUND then
			if tat > t then
				if cost > idiv(tat - t, T) then
					tat = t
				else
					tat = tat - cost * T
				end
			end
		end
		st.at = tat
	elseif a == TOKEN then
		local cap = op.burst * op.period
		local tokens = tokensAt(st, t, op)
		local c = min(cost, 2 * op.burst)
		if op.kind == TAKE then
			if cost <= op.burst and tokens >= cost * op.period then
				tokens = tokens - cost * op.period
			else
				tokens = min(tokens, 0)
			end
		elseif op.kind == ADD then
			tokens = max(tokens - c * op.period, min(tokens, -cap))
		elseif op.kind == REFUND then
			local room = cap - tokens
			if room > 0 then
				tokens = tokens + min(c * op.period, room)
			end
		end
		st.n = tokens
		st.at = max(stamp(st, op), t)
	elseif a == LEAKY then
		local cap = op.burst * op.period
		local level = levelAt(st, t, op)
		local c = min(cost, 2 * op.burst)
		if op.kind == TAKE then
			if cost <= op.burst and level + cost * op.period <= cap then
				level = level + cost * op.period
			else
				level = max(level, cap)
			end
		elseif op.kind == ADD then
			level = min(level + c * op.period, max(level, 2 * cap))
		elseif op.kind == REFUND then
			level = max(level - c * op.period, 0)
		end
		st.n = level
		st.at = max(stamp(st, op), t)
	elseif a == FIXED then
		local start, n = fixedAt(st, t, op)
		st.at, st.n, st.prev = start, consumeCount(n, op, cost), 0
	elseif a == SLIDING then
		local start, prev, cur = slidingAt(st, t, op)
		if op.kind == REFUND and cost > cur then
			-- The unit refunded may have been charged in the previous
			-- window, before the boundary passed.
			prev = max(prev - (cost - cur), 0)
		end
		st.at, st.n, st.prev = start, consumeCount(cur, op, cost), prev
	elseif a == LOG then
		count, newest = consumeLog(st, t, op, cost, u)
	else
		return 0, 0
	end
	st.alg = a
	return count, newest
end

-- Report --------------------------------------------------------------------

-- report is rules' reportState: the units left and the us until the state
-- is back to its full allowance (decayed to empty), its TTL. A
-- sliding_log's count and newest timestamp come from the caller.
local function report(st, t, op, count, newest)
	local a = op.alg
	if a == GCRA then
		local T = idiv(op.period, op.limit)
		local ahead = max(stamp(st, op) - t, 0)
		return max(idiv(op.burst * T - ahead, T), 0), ahead
	elseif a == TOKEN then
		local tokens = tokensAt(st, t, op)
		local reset = ceildiv(op.burst * op.period - tokens, op.limit)
		if reset > 0 then
			reset = reset + skew(st, t, op)
		end
		return idiv(max(tokens, 0), op.period), reset
	elseif a == LEAKY then
		local level = levelAt(st, t, op)
		local reset = ceildiv(level, op.limit)
		if reset > 0 then
			reset = reset + skew(st, t, op)
		end
		return idiv(max(op.burst * op.period - level, 0), op.period), reset
	elseif a == FIXED then
		local start, n = fixedAt(st, t, op)
		if n == 0 then
			return op.limit, 0
		end
		return max(op.limit - n, 0), start + op.period - t
	elseif a == SLIDING then
		local p = op.period
		local start, prev, cur = slidingAt(st, t, op)
		local e = max(t - start, 0)
		local w = prev * (p - e)
		local reset = 0
		if cur > 0 then
			reset = start + 2 * p - t
		elseif w > 0 then
			reset = start + p - t
		end
		return max(op.limit - cur - ceildiv(w, p), 0), reset
	elseif a == LOG then
		if count == 0 then
			return op.limit, 0
		end
		return max(op.limit - count, 0), newest + op.period - t
	end
	return 0, 0
end

if hasLog then
	-- reportLog reports a sliding_log op from the sorted set as it is.
	function reportLog(st, t, op)
		local count, newest = logCount(st, t, op), 0
		if count > 0 then
			newest = logNewest(op)
		end
		return report(st, t, op, count, newest)
	end
end

-- store writes st, which decays in ttl us, to op's keys, or deletes them
-- when ttl is 0 (an empty state is not stored). It returns what it wrote.
local function store(st, op, t, ttl)
	if ttl <= 0 then
		if op.alg == LOG then
			call('DEL', op.key, op.lk)
		else
			call('DEL', op.key)
		end
		return ''
	end
	st.x = t + ttl
	local raw = string.format('%.0f:%.0f:%.0f:%.0f:%.0f', st.alg, st.x, st.at, st.n, st.prev)
	local px = str(ceildiv(ttl, 1000) + slack) -- whole ms, rounded up: never 0
	call('SET', op.key, raw, 'PX', px)
	if op.alg == LOG then
		call('PEXPIRE', op.lk, px)
	end
	return raw
end

-- Modes ---------------------------------------------------------------------

local function take()
	if now < 0 then
		now = time()
	end
	local undoable = flag

	-- Pass 1: decide every op against the state before the call.
	local refused = false
	for _, op in ipairs(ops) do
		op.st, op.raw = load(op.key, now)
		op.ok, op.wait, op.count = check(op.st, now, op)
		if op.kind == TAKE and op.enforce and not op.ok then
			refused = true
		end
	end

	-- Pass 2: consume per the contract, report the state after, store it.
	local out, undo = { now }, {}
	for i, op in ipairs(ops) do
		local st = op.st
		-- (Plain ifs: gopher-lua, miniredis' Lua, miscompiles
		-- "x = a or (b and not c)".)
		local consumes = true
		if op.kind == PEEK then
			consumes = false
		elseif op.kind == TAKE and not op.attempts then
			if not op.ok or refused then
				consumes = false
			end
		end
		local u
		if undoable and op.kind == TAKE and not op.attempts and consumes then
			-- Another slot may refuse the request: then this key must
			-- end as a call that does not consume leaves it, which is
			-- as it is now, or deleted when that state is empty.
			local newest = 0
			if op.alg == LOG and op.count > 0 then
				newest = logNewest(op)
			end
			local _, ttl = report(st, now, op, op.count, newest)
			u = { restore = '', added = {}, removed = {} }
			if ttl > 0 then
				u.restore = op.raw
			end
		end
		local count, newest = op.count, 0
		if consumes then
			count, newest = consume(st, now, op, u)
		elseif op.alg == LOG and count > 0 then
			newest = logNewest(op)
		end
		local remaining, reset = report(st, now, op, count, newest)
		if not op.ok then
			remaining = 0
		end
		local raw = ''
		if consumes then
			raw = store(st, op, now, reset)
		elseif op.raw and reset == 0 then
			store(st, op, now, 0) -- expired, or another algorithm's: as fresh, not stored
		end
		local ok = 0
		if op.ok then
			ok = 1
		end
		out[#out + 1] = ok
		out[#out + 1] = remaining
		out[#out + 1] = reset
		out[#out + 1] = op.wait
		undo[i] = 0
		if u then
			local p = { u.restore, raw, str(#u.added) }
			for _, m in ipairs(u.added) do
				p[#p + 1] = m
			end
			for _, v in ipairs(u.removed) do
				p[#p + 1] = v
			end
			undo[i] = p
		end
	end
	if undoable then
		for i = 1, #ops do
			out[#out + 1] = undo[i]
		end
	end
	return out
end

-- The undo mode's functions exist in that mode only.
if mode == 1 then
	-- restore puts op's key back as the take found it (nothing wrote it
	-- since), and reports it at the take's time t0.
	local function restore(op, raw, added, removed, t0, t)
		local st = decode(raw)
		if st == nil then
			store(fresh(), op, t, 0)
			return report(fresh(), t0, op, 0, 0)
		end
		if op.alg == LOG then
			if #added > 0 then
				zcall('ZREM', op, added)
			end
			if #removed > 0 then
				local args = {}
				for j = 1, #removed, 2 do
					args[#args + 1] = removed[j + 1]
					args[#args + 1] = removed[j]
				end
				zcall('ZADD', op, args)
			end
		end
		local ttl = st.x - t
		if ttl > 0 then
			local px = str(ceildiv(ttl, 1000) + slack)
			call('SET', op.key, raw, 'PX', px)
			if op.alg == LOG then
				call('PEXPIRE', op.lk, px)
			end
		else
			store(st, op, t, 0)
		end
		if op.alg == LOG then
			return reportLog(st, t0, op)
		end
		return report(st, t0, op, 0, 0)
	end

	-- refundOwn gives back, as of t, the part of what the take wrote (ours)
	-- that is verifiably still in the counter, when other calls wrote it since:
	-- the units not yet refilled, drained or out of their window. It never
	-- gives back more than the take took, so an undo never over-admits.
	local function refundOwn(op, ours, added, t)
		local st = load(op.key, t)
		local cost = max(op.cost, 0)
		local a = op.alg
		local changed = false
		if ours ~= nil and st.alg == a then
			if a == GCRA then
				local T = idiv(op.period, op.limit)
				local own = min(cost * T, max(ours.at - t, 0))
				if own > 0 and st.at > t then
					st.at = max(st.at - own, t)
					changed = true
				end
			elseif a == TOKEN then
				local cap = op.burst * op.period
				local own = min(cost * op.period, cap - tokensAt(ours, t, op))
				local tokens = tokensAt(st, t, op)
				if own > 0 and tokens < cap then
					st.n = min(tokens + own, cap)
					st.at = max(st.at, t)
					changed = true
				end
			elseif a == LEAKY then
				local own = min(cost * op.period, levelAt(ours, t, op))
				local level = levelAt(st, t, op)
				if own > 0 and level > 0 then
					st.n = max(level - own, 0)
					st.at = max(st.at, t)
					changed = true
				end
			elseif a == FIXED then
				local start, n = fixedAt(st, t, op)
				if start == ours.at and n > 0 then
					st.at, st.n, st.prev = start, max(n - cost, 0), 0
					changed = true
				end
			elseif a == SLIDING then
				local start, prev, cur = slidingAt(st, t, op)
				if start == ours.at and cur > 0 then
					st.at, st.n, st.prev = start, max(cur - cost, 0), prev
					changed = true
				elseif start == ours.at + op.period and prev > 0 then
					st.at, st.n, st.prev = start, cur, max(prev - cost, 0)
					changed = true
				end
			elseif a == LOG then
				if #added > 0 and zcall('ZREM', op, added) > 0 then
					st.n = st.n + 1
					changed = true
				end
			end
		end
		local remaining, reset
		if a == LOG then
			remaining, reset = reportLog(st, t, op)
		else
			remaining, reset = report(st, t, op, 0, 0)
		end
		if changed then
			store(st, op, t, reset)
		end
		return remaining, reset
	end

	local function undo()
		local t0, t = now, now
		if flag then
			t = time()
		end
		local out, ac = {}, 2
		for _, op in ipairs(ops) do
			local raw, ours, nadded = ARGV[ac], ARGV[ac + 1], tonumber(ARGV[ac + 2])
			local added, removed = {}, {}
			for j = ac + 3, ac + 2 + nadded do
				added[#added + 1] = ARGV[j]
			end
			for j = ac + 3 + nadded, ac + op.m - 1 do
				removed[#removed + 1] = ARGV[j]
			end
			ac = ac + op.m
			local cur = call('GET', op.key)
			if not cur then
				cur = ''
			end
			local remaining, reset
			if cur == ours then
				remaining, reset = restore(op, raw, added, removed, t0, t)
			else
				remaining, reset = refundOwn(op, decode(ours), added, t)
			end
			out[#out + 1] = remaining
			out[#out + 1] = reset
		end
		return out
	end

	return undo()
end

return take()
