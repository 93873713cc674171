-- take.lua is redisstore's only script: the seven algorithms of
-- rules/counter (the six of the policy and count_distinct's),
-- ported function by function, and one rules.Store call
-- over the keys of one hash slot, atomically (Redis runs a script alone).
--
-- Mode 0 (take) is Store.Take: pass 1 checks every op against the state
-- before the call (counter.Check), the call is refused when an enforcing take
-- is not allowed (rules.Refused), and pass 2 settles every op
-- (counter.Settle: consume per the contract, report the state after, store it
-- with its TTL). In a refused call an attempt (count = "attempts") charges
-- a key that exists but makes no new one: a state read as fresh (missing,
-- expired, another algorithm's) is left so, as the memory store leaves
-- it (rules.Store's contract). Mode 1 (undo) gives back what a take of a cross-slot call
-- consumed in this slot when another slot refused the request (doc.go).
--
-- Two paths, measured. The fast path (below) is the five algorithms that
-- need only their string key, written out as straight code; the port is
-- rules/counter function by function and runs every other call. Each
-- EVALSHA runs the whole chunk, so the port makes and collects its two
-- dozen closures and its tables on every call (Cost, below). Against this
-- script with its fast path cut out, on the same calls side by side, the
-- fast path saves 14-34% of Redis' CPU per decision at one call a round
-- trip and 31-45% at eight, for one op of each of the five, three ops as
-- a login route has and five mixed (BenchmarkScriptCPU; BENCHMARKS.md,
-- "Redis script: fast path vs general path (issue 10)"), and only it has
-- a batch mode (coalescing's shared call). So both stay, and the fast path
-- never grows: it is those five algorithms and nothing else.
--
-- A new count mode goes in the port only, once: its entry in rules/counter's
-- table is not FastPath, so wire.go's needsPort sends its calls here, and
-- its Lua name and id join the port table below. count_distinct (distinct
-- accounts per IP) is counter.Distinct, numbered after SlidingLog. It is a
-- case of check, consume (consumeSet) and report, and of restore and
-- refundOwn for a cluster's undo; its set is the key slot after its
-- string, as a sliding_log's sorted set is (use(i) here, hasSet in
-- wire.go: its entry's Set), and its Member an ARGV string after the ops'
-- fields, as an undo's payloads are, so the layout the fast path reads
-- stays as it is. In Go it is a file of rules/counter (its steps), which
-- memstore runs; rules/storetest holds the two to one answer. Two
-- implementations, one per store.
--
-- Numbers. Lua numbers are doubles, exact for integers up to 2^53;
-- counter.ValidateLimits keeps every intermediate value of every algorithm
-- within that (counter.MaxExact) for clocks under 2^52us, so this script and
-- Go compute the same integers. Integer division truncates toward zero as
-- Go's does: idiv derives it from math.fmod, which is exact, rather than
-- from math.floor(a / b), whose rounded quotient can be one off. The fast
-- path uses Lua's % instead (a - floor(a / b) * b, an instruction of the
-- VM, where fmod is a function call that costs Redis' Lua about 5 times
-- as much), and only where a is never negative or a floored remainder is
-- what it wants (a window's start). For integers with |a| < 2^53 both are
-- exact: for the rounded quotient a / b to reach the next integer, the
-- gap of at least 1/b must be under half an ulp of the quotient, which
-- takes |a| >= 2^53. Numbers go
-- to Redis commands through str (%.0f): Lua's tostring keeps 14 digits, and
-- a timestamp in microseconds has 16. The fast path formats with %d, which
-- is cheaper and as exact for these integers (Redis' Lua casts to a C
-- long, gopher-lua to an int64); none of the values it stores can be -0,
-- the one integer-valued double whose %.0f reads differently.
--
-- Keys. Each op's key holds a string "alg:x:at:n:prev": rules.State's
-- fields and x, the expiry (us) the state was written with. A state at or
-- past x reads as fresh whatever Redis' own expiry says (in caller-clock
-- mode Redis expires on another clock than the one deciding). A
-- sliding_log op has a second key, a sorted set beside the string in the
-- same hash slot: its timestamps as scores, members "ts-seq" (unique when
-- two fall in one microsecond); its string is then the log's meta, with n
-- the last seq used. A distinct op's second key is the same name: its
-- members are the Member's 16 hex digits, their scores the time each was
-- last seen (ties sort by member, as rules sorts them), and its string the
-- meta, with n the last seq used and at the newest score written (which a
-- cluster's undo compares with). The meta's algorithm says whose the set
-- is: a set another algorithm wrote reads as empty and is dropped by the
-- next write.
--
-- ARGV holds one integer per element. ARGV[1] is mode + 2*flag + 4*clock
-- + 8*port + 16*seed + 32*ops (seed: the seed pass, below): the flag, in
-- a take, asks for undo payloads, and in
-- an undo to read TIME for the refund; with clock, ARGV[2] and ARGV[3] are
-- now (-1: read TIME) and the slack in ms added to every Redis TTL
-- (caller-clock mode, and every undo), else now is -1 and the slack 0;
-- port says an op is a sliding_log or a distinct count (the port below
-- runs the call). Then per op: kind + 8*algorithm + 64*enforce +
-- 128*attempts + 256*calendar + 512*twin (with seed), limit, burst, period (us), cost, and in undo mode the
-- number of payload strings the op has after the ops' fields. In take
-- mode, each distinct op's Member follows the ops' fields, a string of 16
-- hex digits, in the ops' order (an undo needs none: its payloads name
-- the members). A calendar op (rules.Op.Calendar: a fixed_window of a
-- day, week or month in a time zone, behaviour/calendar) carries its
-- window's start (us) in the burst's place, which a window ignores, and
-- its period is that window's length; only the port runs it (wire.go's
-- needsPort), so the fast path never sees the flag.
--
-- Cost. Redis runs the whole chunk on every call, so every function below
-- is a closure created (and collected) per call, every table is allocated
-- per call, and every number crossing a string costs a conversion: the hot
-- path keeps all three few. An op and its key's state live in locals, not
-- tables: the op being decided in the upvalues use(i) sets, its state
-- (rules.State's alg, at, n, prev) passed as four numbers. The undo mode's
-- functions are created only in that mode, the sliding_log's only when an
-- op needs them.
--
-- A take returns {now, then per op: allowed (0/1), remaining,
-- reset_after_us, retry_after_us (-1: never)}, the last two as
-- counter.Settle fills ResetAfter and RetryAfter from the state after the
-- call (reset_after_us: the effective window, RateLimit's t, not the TTL;
-- retry_after_us: the wait from that state), then with the flag one
-- payload per op: 0, or the strings an undo needs (what the key holds when
-- no unit is taken, what this call wrote, the sliding_log or distinct
-- members added, the member/score pairs dropped or, for a distinct value
-- seen again, moved from their old scores). An undo returns {remaining,
-- reset_after_us (the effective window)} per op. A batch (ARGV[1] negative: several takes of the
-- fast path in one script call, below) returns one take's reply per call.

-- The port table: each algorithm's id (an op code's 8*algorithm) under its
-- entry's Lua name in rules/counter's table, and the op kinds' ids
-- (TestTakeLuaMatchesTable holds both, and the sorted-set and member
-- tests below, to the table).
local GCRA, TOKEN, LEAKY, FIXED, SLIDING, LOG, DISTINCT = 0, 1, 2, 3, 4, 5, 6
local TAKE, PEEK, ADD, REFUND, RESET = 0, 1, 2, 3, 4

local call, tonumber, format, match, unpack, setmetatable = redis.call, tonumber, string.format, string.match, unpack, setmetatable
local fmod, max, min = math.fmod, math.max, math.min

if redis.replicate_commands then
	redis.replicate_commands() -- Redis < 5: replicate the writes, not the script (it reads TIME)
end

local head = tonumber(ARGV[1])
-- A batch: ARGV[1] is minus the number of calls, each a take of the fast
-- path (below) laid out as a call of its own, one after another: its
-- header, its now and slack with clock, its ops' fields; KEYS are the
-- calls' keys in the same order. argAt is the ARGV index of the call's
-- header, kb the KEYS index before its keys.
local ncalls, argAt, kb, replies = 1, 1, 0, nil
if head < 0 then
	ncalls, argAt, replies = -head, 2, {}
	head = tonumber(ARGV[2])
end
local mode, flag, port = head % 2, head % 4 >= 2, head % 16 >= 8
local nops = (head - head % 32) / 32
local now, slack, base = -1, 0, argAt -- base: ARGV's index before the ops' fields
if head % 8 >= 4 then
	now, slack, base = tonumber(ARGV[argAt + 1]), tonumber(ARGV[argAt + 2]), argAt + 2
end

local stateFormat = '^(%d+):(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+)$'

-- The seed pass ----------------------------------------------------------------

-- A key-secret rotation's call (seed: head's 16; rules.Op.Twin, wire.go's
-- prepare): an op whose code has 512 is the twin, under the previous key
-- secret, of the op before it. Before anything is decided, when that op's
-- key holds nothing, the twin's keys are copied to its keys with their
-- TTLs (a sliding_log's sorted set too), so that a counter, a ban or a
-- lockout goes on under the new secret whole; the twin's keys stay, for
-- nodes still on the previous secret, and the twin is then decided and
-- applied as any op. Not a distinct count's: its members are hashes under
-- the previous secret. Never in a batch (a seeded call is not shareable).
if head % 32 >= 16 then
	local ki, pk = 0, 0 -- KEYS index before op i's keys, and before op i-1's
	for i = 1, nops do
		local code = tonumber(ARGV[base + 5 * i - 4])
		local a = (code % 64 - code % 8) / 8
		if code >= 512 and a ~= DISTINCT and call('EXISTS', KEYS[pk + 1]) == 0 then
			local v, ttl = call('GET', KEYS[ki + 1]), call('PTTL', KEYS[ki + 1])
			if v and ttl > 0 then
				call('SET', KEYS[pk + 1], v, 'PX', ttl)
				if a == LOG then
					call('DEL', KEYS[pk + 2])
					local m = call('ZRANGE', KEYS[ki + 2], 0, -1, 'WITHSCORES')
					for j = 1, #m, 2 do
						call('ZADD', KEYS[pk + 2], m[j + 1], m[j])
					end
					local lt = call('PTTL', KEYS[ki + 2])
					if lt > 0 then
						call('PEXPIRE', KEYS[pk + 2], lt)
					end
				end
			end
		end
		pk = ki
		ki = ki + 1
		if a == LOG or a == DISTINCT then
			ki = ki + 1
		end
	end
end

-- The fast path ----------------------------------------------------------------

-- A take whose ops are all of the five algorithms without a sorted set
-- (no sliding_log: the common call) runs here, as straight code in the
-- chunk itself: no closure (each costs Redis an allocation and a walk of
-- the open upvalues per upvalue it captures, which for the function per
-- helper of the port below is most of a one-op call's time) and, for one
-- op, no table but the reply. It decides exactly as the port does
-- (rules/storetest and the port's own tables check both): it reads each
-- state once, as counter's ...At helpers do (the view: gcra's TAT, a
-- bucket's tokens or level and its stamp, a window's start and counts),
-- and Consume and reportState work on that view, updated in place: a
-- consumed state's stamp is at least now, so it reads back as written.
-- Integer divisions are idiv and ceildiv (below) written out.

if mode == 0 and not port then
	local tnow = -1 -- the server's TIME, read once for all the calls of a batch
	-- num maps an op field's string to its number, converting each
	-- distinct string once: a policy's ops repeat a few values (and a
	-- batch's calls the same ops), and a lookup costs a fraction of
	-- tonumber's parse.
	local num = setmetatable({}, { __index = function(t, s)
		local v = tonumber(s)
		t[s] = v
		return v
	end })
	for ci = 1, ncalls do
		local t = now
		if t < 0 then
			if tnow < 0 then
				local tm = call('TIME')
				tnow = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
			end
			t = tnow
		end
		-- The op in hand: its fields (T: gcra's emission interval), its key's
		-- raw value and state, the view and the decision. A call of several
		-- ops keeps each op's in kept (a table an op) between the passes.
		local code, kind, a, limit, burst, period, cost, T
		local raw, sa, at, n, prev, v1, v2, v3, ok, wait
		local kept, refused = nil, false
		local raws = nil -- the keys' values, one MGET for a call of several ops
		if nops > 1 then
			kept = {}
			raws = call('MGET', unpack(KEYS, kb + 1, kb + nops))
		end

		-- Pass 1: decide every op against the state before the call
		-- (counter.Check).
		for i = 1, nops do
			local f = base + 5 * i - 4
			code, limit, burst, period = num[ARGV[f]], num[ARGV[f + 1]], num[ARGV[f + 2]], num[ARGV[f + 3]]
			cost = max(num[ARGV[f + 4]], 0)
			kind, a = code % 8, (code % 64 - code % 8) / 8
			if raws then
				raw = raws[i]
			else
				raw = call('GET', KEYS[kb + i])
			end
			sa, at, n, prev = 0, 0, 0, 0
			if raw then
				local ra, rx, rat, rn, rp = match(raw, stateFormat)
				if ra and t < tonumber(rx) then
					sa, at, n, prev = tonumber(ra), tonumber(rat), tonumber(rn), tonumber(rp)
				end
			end
			-- The view; a state of another algorithm reads as fresh.
			v1, v2, v3 = 0, 0, 0
			if a == GCRA then
				T = (period - period % limit) / limit
				if sa == a then
					v1 = at -- TAT
				end
			elseif a == TOKEN then
				local cap = burst * period
				v1 = cap -- tokens; v2: stamp
				if sa == a then
					v1, v2 = min(n, cap), at
					local elapsed = t - at
					if elapsed > 0 then
						local d = cap - v1
						if elapsed > (d - d % limit) / limit then
							v1 = cap
						else
							v1 = v1 + elapsed * limit
						end
					end
				end
			elseif a == LEAKY then
				if sa == a then
					v1, v2 = n, at -- level, stamp
					local elapsed = t - at
					if elapsed > 0 then
						if elapsed > (v1 - fmod(v1, limit)) / limit then
							v1 = 0
						else
							v1 = v1 - elapsed * limit
						end
					end
				end
			else
				local r = t % period -- windows start at multiples of the period
				v1 = t - r -- start; fixed_window v2: count; sliding_window v2, v3: prev, cur
				if a == FIXED then
					if sa == a and at >= v1 then
						v1, v2 = at, n
					end
				elseif sa == a and at >= v1 - period then
					if at < v1 then
						v2 = n
					else
						v1, v2, v3 = at, prev, n
					end
				end
			end
			-- The wait: 0 now, -1 never.
			wait = 0
			if kind == REFUND or kind == RESET then
				wait = 0
			elseif a == GCRA then
				if cost > burst then
					wait = -1
				else
					wait = max(max(v1, t) + cost * T - t - burst * T, 0)
				end
			elseif a == TOKEN then
				if cost > burst then
					wait = -1
				else
					local need = cost * period - v1
					if need > 0 then
						local q = need + limit - 1
						wait = max(v2 - t, 0) + (q - q % limit) / limit
					end
				end
			elseif a == LEAKY then
				if cost > burst then
					wait = -1
				else
					local excess = v1 + cost * period - burst * period
					if excess > 0 then
						local q = excess + limit - 1
						wait = max(v2 - t, 0) + (q - q % limit) / limit
					end
				end
			elseif a == FIXED then
				if cost > limit then
					wait = -1
				elseif v2 + cost > limit then
					wait = v1 + period - t
				end
			elseif cost > limit then -- sliding_window from here
				wait = -1
			else
				local p = period
				local room = limit - v3 - cost
				if room >= 0 then
					if v2 * (p - max(t - v1, 0)) > room * p then
						local q = room * p
						wait = v1 + p - (q - q % v2) / v2 - t
					end
				else
					local q = (limit - cost) * p
					wait = v1 + 2 * p - (q - q % v3) / v3 - t
				end
			end
			if wait < 0 then
				wait = -1
			end
			ok = wait == 0
			if kind == TAKE and code % 128 >= 64 and not ok then
				refused = true
			end
			if kept then
				-- One table an op, built whole: filling one table of them
				-- all grows it, and each growth rehashes it.
				kept[i] = { code, limit, burst, period, cost, raw, sa, at, n, prev, v1, v2, v3, ok, wait, T }
			end
		end

		-- Pass 2: consume per the contract, report the state after, store it
		-- with its TTL (counter.Settle).
		local out, pays = nil, nil
		if nops > 1 or flag or replies then
			out = { t }
		end
		if flag then
			pays = {}
		end
		for i = 1, nops do
			if kept then
				local k = kept[i]
				code, limit, burst, period, cost = k[1], k[2], k[3], k[4], k[5]
				raw, sa, at, n, prev = k[6], k[7], k[8], k[9], k[10]
				v1, v2, v3, ok, wait, T = k[11], k[12], k[13], k[14], k[15], k[16]
				kind, a = code % 8, (code % 64 - code % 8) / 8
			end
			local attempts = code % 256 >= 128
			-- (Plain ifs: gopher-lua, miniredis' Lua, miscompiles
			-- "x = a or (b and not c)".)
			-- fresh: the key holds no live state of the op's algorithm (a
			-- live gcra state's TAT is its expiry, after t).
			local fresh = false
			if sa ~= a then
				fresh = true
			elseif a == GCRA and at <= t then
				fresh = true
			end
			local consumes = true
			if kind == PEEK then
				consumes = false
			elseif kind == TAKE and not attempts then
				if not ok or refused then
					consumes = false
				end
			elseif kind == TAKE and refused and fresh then
				consumes = false -- an attempt in a refused call makes no new key
			end
			-- Step 1 reports the state before (only for an undo payload: when
			-- another slot refuses the request, this key must end as a call that
			-- does not consume leaves it, which is as it is now, or deleted when
			-- that state is empty; an attempt that made a new key is undone
			-- too); step 2 consumes and reports the state after.
			local first, restore, remaining, reset = 2, nil, 0, 0
			if flag and kind == TAKE and consumes then
				if not attempts or fresh then
					first = 1
				end
			end
			for step = first, 2 do
				if step == 2 and consumes then
					if kind == RESET then
						sa, at, n, prev = 0, 0, 0, 0
						v1, v2, v3 = 0, 0, 0
						if a == TOKEN then
							v1 = burst * period
						elseif a >= FIXED then
							local r = t % period
							v1 = t - r
						end
					elseif a == GCRA then
						local tol = burst * T
						local tat = v1
						local base = max(tat, t)
						if kind == TAKE then
							if cost <= burst and base + cost * T - t <= tol then
								tat = base + cost * T
							else
								tat = max(tat, t + tol) -- full, never lowered
							end
						elseif kind == ADD then
							tat = max(tat, min(base + min(cost, 2 * burst) * T, t + 2 * tol))
						elseif kind == REFUND then
							if tat > t then
								local d = tat - t
								if cost > (d - fmod(d, T)) / T then
									tat = t
								else
									tat = tat - cost * T
								end
							end
						end
						sa, at, v1 = a, tat, tat
					elseif a == TOKEN then
						local cap = burst * period
						local tokens = v1
						local c = min(cost, 2 * burst)
						if kind == TAKE then
							if cost <= burst and tokens >= cost * period then
								tokens = tokens - cost * period
							else
								tokens = min(tokens, 0)
							end
						elseif kind == ADD then
							tokens = max(tokens - c * period, min(tokens, -cap))
						elseif kind == REFUND then
							local room = cap - tokens
							if room > 0 then
								tokens = tokens + min(c * period, room)
							end
						end
						sa, at, n, v1 = a, max(v2, t), tokens, tokens
					elseif a == LEAKY then
						local cap = burst * period
						local level = v1
						local c = min(cost, 2 * burst)
						if kind == TAKE then
							if cost <= burst and level + cost * period <= cap then
								level = level + cost * period
							else
								level = max(level, cap)
							end
						elseif kind == ADD then
							level = min(level + c * period, max(level, 2 * cap))
						elseif kind == REFUND then
							level = max(level - c * period, 0)
						end
						sa, at, n, v1 = a, max(v2, t), level, level
					else
						-- The windows: consumeCount on the current count.
						local cnt = v2
						if a == SLIDING then
							cnt = v3
							if kind == REFUND and cost > cnt then
								-- The unit refunded may have been charged in the
								-- previous window, before the boundary passed.
								v2 = max(v2 - (cost - cnt), 0)
							end
						end
						if kind == TAKE then
							cnt = min(cnt + min(cost, limit + 1), max(cnt, limit))
						elseif kind == ADD then
							cnt = min(cnt + min(cost, 2 * limit), max(cnt, 2 * limit))
						elseif kind == REFUND then
							cnt = max(cnt - cost, 0)
						end
						if a == FIXED then
							sa, at, n, prev, v2 = a, v1, cnt, 0, cnt
						else
							sa, at, n, prev, v3 = a, v1, cnt, v2, cnt
						end
					end
				end
				-- reportState: the units left, and the us until the state is
				-- back to its full allowance (decayed to empty), its TTL.
				if a == GCRA then
					reset = max(v1 - t, 0)
					local d = burst * T - reset
					remaining = max((d - d % T) / T, 0)
				elseif a == TOKEN then
					local d = burst * period - v1
					reset = 0
					if d > 0 then
						local q = d + limit - 1
						reset = (q - q % limit) / limit + max(v2 - t, 0)
					end
					local m = max(v1, 0)
					remaining = (m - m % period) / period
				elseif a == LEAKY then
					reset = 0
					if v1 > 0 then
						local q = v1 + limit - 1
						reset = (q - q % limit) / limit + max(v2 - t, 0)
					end
					local m = max(burst * period - v1, 0)
					remaining = (m - m % period) / period
				elseif a == FIXED then
					if v2 == 0 then
						remaining, reset = limit, 0
					else
						remaining, reset = max(limit - v2, 0), v1 + period - t
					end
				else
					local w = v2 * (period - max(t - v1, 0))
					reset = 0
					if v3 > 0 then
						reset = v1 + 2 * period - t
					elseif w > 0 then
						reset = v1 + period - t
					end
					local cw = 0
					if w > 0 then
						local q = w + period - 1
						cw = (q - q % period) / period
					end
					remaining = max(limit - v3 - cw, 0)
				end
				if step == 1 then
					restore = ''
					if reset > 0 then
						restore = raw
					end
				end
			end
			-- What the reply shows as reset_after (counter.Settle): allowed
			-- (or never), the effective window, rules' windowUS: the units
			-- left spent now, the us until one more fits; refused, the wait
			-- from the state the call leaves, which only a refused op that
			-- consumed (an attempt, an add) has moved. reset stays the TTL.
			local shown = wait
			if ok or wait < 0 then
				if a == GCRA then
					local tol = burst * T
					local ahead = max(v1 - t, 0)
					local d = tol - ahead
					shown = ahead + (max((d - d % T) / T, 0) + 1) * T - tol
				elseif a == TOKEN then
					local m = max(v1, 0)
					local q = ((m - m % period) / period + 1) * period - v1 + limit - 1
					shown = max(v2 - t, 0) + (q - q % limit) / limit
				elseif a == LEAKY then
					local cap = burst * period
					local m = max(cap - v1, 0)
					local q = v1 + ((m - m % period) / period + 1) * period - cap + limit - 1
					shown = max(v2 - t, 0) + (q - q % limit) / limit
				elseif a == FIXED then
					shown = v1 + period - t
				else
					-- sliding_window: slidingWait for one unit with the r
					-- left added to the current count.
					local p = period
					local w = v2 * (p - max(t - v1, 0))
					local cw = 0
					if w > 0 then
						local q = w + p - 1
						cw = (q - q % p) / p
					end
					local c = v3 + max(limit - v3 - cw, 0)
					local room = limit - c - 1
					if room >= 0 then
						local q = room * p
						shown = v1 + p - (q - q % v2) / v2 - t
					else
						local q = (limit - 1) * p
						shown = v1 + 2 * p - (q - q % c) / c - t
					end
				end
			elseif consumes then
				-- counter.Check's wait again, on the view after the call.
				wait = 0
				if a == GCRA then
					wait = max(max(v1, t) + cost * T - t - burst * T, 0)
				elseif a == TOKEN then
					local need = cost * period - v1
					if need > 0 then
						local q = need + limit - 1
						wait = max(v2 - t, 0) + (q - q % limit) / limit
					end
				elseif a == LEAKY then
					local excess = v1 + cost * period - burst * period
					if excess > 0 then
						local q = excess + limit - 1
						wait = max(v2 - t, 0) + (q - q % limit) / limit
					end
				elseif a == FIXED then
					if v2 + cost > limit then
						wait = v1 + period - t
					end
				else
					local p = period
					local room = limit - v3 - cost
					if room >= 0 then
						if v2 * (p - max(t - v1, 0)) > room * p then
							local q = room * p
							wait = v1 + p - (q - q % v2) / v2 - t
						end
					else
						local q = (limit - cost) * p
						wait = v1 + 2 * p - (q - q % v3) / v3 - t
					end
				end
				shown = wait
			end
			if not ok then
				remaining = 0
			end
			local written = ''
			if consumes then
				if reset > 0 then
					if n == 0 and prev == 0 then
						-- The same text, two numbers fewer to format: a gcra
						-- state's n and prev are 0.
						written = format('%d:%d:%d:0:0', sa, t + reset, at)
					else
						written = format('%d:%d:%d:%d:%d', sa, t + reset, at, n, prev)
					end
					local ms = reset + 999 -- whole ms, rounded up: never 0
					call('SET', KEYS[kb + i], written, 'PX', format('%d', (ms - ms % 1000) / 1000 + slack))
				else
					call('DEL', KEYS[kb + i]) -- empty: not stored
				end
			elseif raw and reset == 0 then
				call('DEL', KEYS[kb + i]) -- expired, or another algorithm's: as fresh, not stored
			end
			local allowed = 0
			if ok then
				allowed = 1
			end
			if not out then
				return { t, allowed, remaining, shown, wait }
			end
			local o = 4 * i - 3 -- out[1] is t
			out[o + 1], out[o + 2], out[o + 3], out[o + 4] = allowed, remaining, shown, wait
			if pays then
				pays[i] = 0
				if restore then
					pays[i] = { restore, written, '0' }
				end
			end
		end
		if pays then
			for i = 1, nops do
				out[1 + 4 * nops + i] = pays[i]
			end
		end
		if not replies then
			return out
		end
		replies[ci] = out
		-- The next call of the batch: its header follows this call's ops.
		argAt, kb = base + 5 * nops + 1, kb + nops
		if ci < ncalls then
			head = tonumber(ARGV[argAt])
			flag, nops = head % 4 >= 2, (head - head % 32) / 32
			now, slack, base = -1, 0, argAt
			if head % 8 >= 4 then
				now, slack, base = tonumber(ARGV[argAt + 1]), tonumber(ARGV[argAt + 2]), argAt + 2
			end
		end
	end
	return replies
end

-- The port --------------------------------------------------------------------

-- Every other call (one with a sliding_log op, an undo) runs the port of
-- rules/counter, function by function.

local width = 5 + mode -- an undo's ops carry their payload count too

-- h holds the ops' fields; hasSet: an op keeps a sorted set (a
-- sliding_log's timestamps, a distinct count's members).
local h, hasSet = {}, false
for j = 1, width * nops do
	h[j] = tonumber(ARGV[base + j])
end
for j = 1, width * nops, width do
	local a = (h[j] % 64 - h[j] % 8) / 8
	if a == LOG or a == DISTINCT then
		hasSet = true
	end
end

-- idiv is Go's a / b for integers: truncated toward zero, exact.
local function idiv(a, b)
	return (a - fmod(a, b)) / b
end

-- ceildiv is counter's ceilDiv: ceil(a/b) for b > 0, and 0 for a <= 0.
local function ceildiv(a, b)
	if a <= 0 then
		return 0
	end
	return idiv(a + b - 1, b)
end

local function str(x)
	return format('%.0f', x)
end

-- The op being decided: use(i) sets these to op i's fields, cost at least
-- 0, T gcra's emission interval, isSet whether it keeps a sorted set (lk,
-- its key), member a distinct op's Member (in a take only). The ops are
-- used in order, 1 first, so that each finds its keys (a sliding_log's or
-- a distinct's two) after the previous one's, and a distinct op its
-- Member after the previous distinct op's, ARGV's strings after the ops'
-- fields.
local kind, alg, enforce, attempts, limit, burst, period, cost, T, key, lk, isSet, member
local calStart -- a calendar op's window start (us), nil for any other op
local nextKey, nextMember = 1, 1

local function use(i)
	if i == 1 then
		nextKey, nextMember = 1, base + width * nops + 1
	end
	local b = width * (i - 1)
	local code = h[b + 1]
	kind, alg = code % 8, (code - code % 8) / 8 % 8
	enforce, attempts = code % 128 >= 64, code % 256 >= 128
	limit, burst, period, cost = h[b + 2], h[b + 3], h[b + 4], max(h[b + 5], 0)
	calStart = nil
	if code % 512 >= 256 then
		calStart, burst = burst, 0
	end
	if alg == GCRA then
		T = idiv(period, limit)
	end
	key = KEYS[nextKey]
	nextKey = nextKey + 1
	isSet = alg == LOG or alg == DISTINCT
	if isSet then
		lk = KEYS[nextKey]
		nextKey = nextKey + 1
	end
	if alg == DISTINCT and mode == 0 then
		member = ARGV[nextMember]
		nextMember = nextMember + 1
	end
end

-- State ---------------------------------------------------------------------

-- A key's state is four numbers, rules.State's fields: sa (the algorithm
-- that wrote it), at, n, prev. The fresh state is 0, 0, 0, 0.

-- The sorted set's functions, defined only when an op needs them.
local logCount, logNewest, zcall, consumeLog, consumeSet, reportLog

-- time reads the server's clock (us).
local function time()
	local t = call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- load returns the raw value of the op's key (false when missing) and its
-- state at t: fresh when missing, unreadable or expired.
local function load(t)
	local raw = call('GET', key)
	if raw then
		local a, x, at, n, p = match(raw, stateFormat)
		if a and t < tonumber(x) then
			return raw, tonumber(a), tonumber(at), tonumber(n), tonumber(p)
		end
	end
	return raw, 0, 0, 0, 0
end

-- The ...At helpers of rules/counter: a state read as of t for the
-- op's algorithm; a state of another algorithm reads as fresh.

local function stamp(sa, at)
	if sa ~= alg then
		return 0
	end
	return at
end

local function skew(sa, at, t)
	return max(stamp(sa, at) - t, 0)
end

local function tokensAt(sa, at, n, t)
	local cap = burst * period
	if sa ~= alg then
		return cap
	end
	local tokens = min(n, cap)
	local elapsed = t - at
	if elapsed <= 0 then
		return tokens
	end
	if elapsed > idiv(cap - tokens, limit) then
		return cap
	end
	return tokens + elapsed * limit
end

local function levelAt(sa, at, n, t)
	if sa ~= alg then
		return 0
	end
	local level = n
	local elapsed = t - at
	if elapsed <= 0 then
		return level
	end
	if elapsed > idiv(level, limit) then
		return 0
	end
	return level - elapsed * limit
end

local function windowStart(t)
	if calStart then
		return calStart
	end
	local r = fmod(t, period)
	if r < 0 then
		r = r + period
	end
	return t - r
end

local function fixedAt(sa, at, n, t)
	local start = windowStart(t)
	if sa ~= alg or at < start then
		return start, 0
	end
	return at, n
end

local function slidingAt(sa, at, n, prev, t)
	local start = windowStart(t)
	if sa ~= alg or at < start - period then
		return start, 0, 0
	end
	if at < start then
		return start, n, 0
	end
	return at, prev, n
end

if hasSet then
	-- The set's scores (a log's timestamps, a distinct's last-seen times)
	-- in the window at t are those > t - period. A set another algorithm
	-- wrote (the meta's sa) reads as empty.
	function logCount(sa, t)
		if sa ~= alg then
			return 0
		end
		return call('ZCOUNT', lk, str(t - period + 1), '+inf')
	end

	function logNewest()
		local r = call('ZRANGE', lk, '-1', '-1', 'WITHSCORES')
		return tonumber(r[2])
	end

	-- zcall runs cmd on the op's log with args in chunks (Lua's unpack has
	-- a stack limit), returning the sum of the integer replies.
	function zcall(cmd, args)
		local total, i = 0, 1
		while i <= #args do
			local chunk = { cmd, lk }
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

-- slidingWait is rules' slidingWait: the us until a take of c fits the
-- estimate of a window starting at start with counts pr and cur.
local function slidingWait(start, pr, cur, t, c)
	local p = period
	local e = max(t - start, 0)
	local room = limit - cur - c
	if room >= 0 then
		if pr * (p - e) <= room * p then
			return 0
		end
		return start + p - idiv(room * p, pr) - t
	end
	return start + 2 * p - idiv((limit - c) * p, cur) - t
end

-- check is counter.Check: whether a take of the op's cost fits, the us until
-- it does (0 now, -1 never), and for a sliding_log the timestamps in the
-- window (for report).
local function check(sa, at, n, prev, t)
	if kind == REFUND or kind == RESET then
		return true, 0, 0
	end
	local wait, count = 0, 0
	if alg == GCRA then
		if cost > burst then
			wait = -1
		else
			local tat = max(stamp(sa, at), t)
			wait = max(tat + cost * T - t - burst * T, 0)
		end
	elseif alg == TOKEN then
		if cost > burst then
			wait = -1
		else
			local need = cost * period - tokensAt(sa, at, n, t)
			if need > 0 then
				wait = skew(sa, at, t) + ceildiv(need, limit)
			end
		end
	elseif alg == LEAKY then
		if cost > burst then
			wait = -1
		else
			local excess = levelAt(sa, at, n, t) + cost * period - burst * period
			if excess > 0 then
				wait = skew(sa, at, t) + ceildiv(excess, limit)
			end
		end
	elseif alg == FIXED then
		if cost > limit then
			wait = -1
		else
			local start, cnt = fixedAt(sa, at, n, t)
			if cnt + cost > limit then
				wait = max(start + period - t, 1) -- rules.fixedLeft
			end
		end
	elseif alg == SLIDING then
		if cost > limit then
			wait = -1
		else
			local start, pr, cur = slidingAt(sa, at, n, prev, t)
			wait = slidingWait(start, pr, cur, t, cost)
		end
	elseif alg == LOG then
		count = logCount(sa, t)
		if cost > limit then
			wait = -1
		else
			local k = count + cost - limit
			if k > 0 then
				-- The k oldest timestamps in the window must leave it.
				local r = call('ZRANGEBYSCORE', lk, str(t - period + 1), '+inf', 'WITHSCORES', 'LIMIT', str(k - 1), '1')
				wait = tonumber(r[2]) + period - t
			end
		end
	elseif alg == DISTINCT then
		-- One member: a live one is counted already, a new one needs cost
		-- places (1, or one more for each value of the same key earlier in
		-- the call: rules/values.go), which the oldest live members give
		-- up when they expire (the k-th oldest, after a limit was lowered);
		-- never, when cost is over the limit.
		count = logCount(sa, t)
		local places = max(cost, 1)
		local k = count + places - limit
		if k > 0 or places > limit then
			local s = call('ZSCORE', lk, member)
			if not s or tonumber(s) <= t - period then
				if places > limit then
					wait = -1
				else
					local r = call('ZRANGEBYSCORE', lk, str(t - period + 1), '+inf', 'WITHSCORES', 'LIMIT', str(k - 1), '1')
					wait = tonumber(r[2]) + period - t
				end
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

-- window is rules' windowUS, the effective window (RateLimit's t) of the
-- state at t: the us until one unit more than those left fits, had the
-- client spent them at t.
local function window(sa, at, n, prev, t)
	if alg == GCRA then
		local tol = burst * T
		local ahead = max(stamp(sa, at) - t, 0)
		return ahead + (max(idiv(tol - ahead, T), 0) + 1) * T - tol
	elseif alg == TOKEN then
		local tokens = tokensAt(sa, at, n, t)
		local r = idiv(max(tokens, 0), period)
		return skew(sa, at, t) + ceildiv((r + 1) * period - tokens, limit)
	elseif alg == LEAKY then
		local cap = burst * period
		local level = levelAt(sa, at, n, t)
		local r = idiv(max(cap - level, 0), period)
		return skew(sa, at, t) + ceildiv(level + (r + 1) * period - cap, limit)
	elseif alg == FIXED then
		local start = fixedAt(sa, at, n, t)
		return max(start + period - t, 1)
	elseif alg == SLIDING then
		local p = period
		local start, pr, cur = slidingAt(sa, at, n, prev, t)
		local r = max(limit - cur - ceildiv(pr * (p - max(t - start, 0)), p), 0)
		return slidingWait(start, pr, cur + r, t, 1)
	elseif isSet then
		-- Spent, the log holds max(count, limit) timestamps (a distinct
		-- set, members); one more fits once the k-th oldest has left.
		local count = logCount(sa, t)
		local k = max(count, limit) + 1 - limit
		if k <= count then
			local r = call('ZRANGEBYSCORE', lk, str(t - period + 1), '+inf', 'WITHSCORES', 'LIMIT', str(k - 1), '1')
			return tonumber(r[2]) + period - t
		end
		return period
	end
	return 0
end

-- shownAfter is what a reply shows as reset_after_us and retry_after_us for the
-- op (counter.Settle) from its state after the call: allowed (ok), the
-- effective window and 0; refused, the wait from that state twice (an
-- attempt or an add that consumed while refused has moved it); never
-- (wait -1), the window and -1.
local function shownAfter(ok, wait, sa, at, n, prev, t)
	if ok or wait < 0 then
		return window(sa, at, n, prev, t), wait
	end
	local _, w = check(sa, at, n, prev, t)
	if w == 0 then
		w = 1 -- a Distinct op of several places an attempt counted, now known (counter.Settle)
	end
	return w, w
end

-- Consume -------------------------------------------------------------------

local function consumeCount(n)
	if kind == TAKE then
		return min(n + min(cost, limit + 1), max(n, limit))
	elseif kind == ADD then
		return min(n + min(cost, 2 * limit), max(n, 2 * limit))
	elseif kind == REFUND then
		return max(n - cost, 0)
	end
	return n
end

if hasSet then
	-- consumeLog is rules' consumeLog on the sorted set, for a state of
	-- algorithm sa whose n is the last seq used. It returns the new n (the
	-- seq written), the timestamps left (all in the window) and the newest.
	-- u, when given, collects what an undo needs: the members added and the
	-- entries dropped.
	function consumeLog(sa, seq, t, u)
		local n = 0
		if sa == LOG then
			-- Drop what has left the window, then anything beyond the newest
			-- Limit (a limit lowered by a reload).
			local cut = str(t - period)
			if u then
				local old = call('ZRANGEBYSCORE', lk, '-inf', cut, 'WITHSCORES')
				for j = 1, #old do
					u.removed[#u.removed + 1] = old[j]
				end
			end
			call('ZREMRANGEBYSCORE', lk, '-inf', cut)
			n = call('ZCARD', lk)
			if n > limit then
				if u then
					local old = call('ZRANGE', lk, '0', str(n - limit - 1), 'WITHSCORES')
					for j = 1, #old do
						u.removed[#u.removed + 1] = old[j]
					end
				end
				call('ZREMRANGEBYRANK', lk, '0', str(n - limit - 1))
				n = limit
			end
		else
			seq = 0
			call('DEL', lk) -- another algorithm's, or expired: start afresh
		end
		local newest = 0
		if kind == TAKE or kind == ADD then
			local c = min(cost, limit)
			local drop = n + c - limit
			if drop > 0 then
				call('ZREMRANGEBYRANK', lk, '0', str(drop - 1))
				n = n - drop
			end
			-- Timestamps stay ascending even when the clock stepped back.
			local ts, top = t, 0
			if n > 0 then
				top = logNewest()
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
			zcall('ZADD', args)
			seq = seq + c
			n = n + c
			if c > 0 then
				newest = ts
			else
				newest = top
			end
		elseif kind == REFUND then
			-- Give back the newest units: most likely this request's own.
			local k = min(cost, n)
			if k > 0 then
				call('ZREMRANGEBYRANK', lk, str(-k), '-1')
				n = n - k
			end
			if n > 0 then
				newest = logNewest()
			end
		end
		-- Every write changes the meta (seq + 1), so an undo can tell whether
		-- anything wrote the log after it.
		return seq + 1, n, newest
	end

	-- consumeSet is rules' consumeDistinct on the sorted set (members: the
	-- Member's 16 hex digits; scores: the time each was last seen), for a
	-- state of algorithm sa whose n is the last seq used. Ties in score
	-- sort by member, as rules keeps them, so a trim drops the same ones.
	-- It returns the new n (the seq written), the members left (all live)
	-- and the newest score. u, when given, collects what an undo needs: the
	-- member counted (added) and the entries dropped or moved, with their
	-- old scores (removed).
	function consumeSet(sa, seq, t, u)
		local n = 0
		if sa == DISTINCT then
			local cut = str(t - period)
			if u then
				local old = call('ZRANGEBYSCORE', lk, '-inf', cut, 'WITHSCORES')
				for j = 1, #old do
					u.removed[#u.removed + 1] = old[j]
				end
			end
			call('ZREMRANGEBYSCORE', lk, '-inf', cut)
			n = call('ZCARD', lk)
		else
			seq = 0
			call('DEL', lk) -- another algorithm's, or expired: start afresh
		end
		local ts = t
		if n > 0 then
			ts = max(ts, logNewest())
		end
		local keep = limit
		if kind ~= PEEK and n > 0 then
			local s = call('ZSCORE', lk, member)
			if s then
				call('ZREM', lk, member)
				n = n - 1
				if u then
					u.removed[#u.removed + 1] = member
					u.removed[#u.removed + 1] = s
				end
				if kind ~= REFUND then
					keep = limit - 1 -- its place is kept for it
				end
			end
		end
		if n > keep then
			if u then
				local old = call('ZRANGE', lk, '0', str(n - keep - 1), 'WITHSCORES')
				for j = 1, #old do
					u.removed[#u.removed + 1] = old[j]
				end
			end
			call('ZREMRANGEBYRANK', lk, '0', str(n - keep - 1))
			n = keep
		end
		local newest = 0
		if (kind == TAKE or kind == ADD) and n < limit then
			call('ZADD', lk, str(ts), member)
			n = n + 1
			newest = ts
			if u then
				u.added[#u.added + 1] = member
			end
		elseif n > 0 then
			newest = logNewest()
		end
		return seq + 1, n, newest
	end
end

-- consume is counter.Consume on the state sa, at, n, prev: it returns the
-- state after, and for a sliding_log the timestamps left and the newest.
local function consume(sa, at, n, prev, t, u)
	if kind == RESET then
		if isSet then
			call('DEL', lk)
		end
		return 0, 0, 0, 0, 0, 0
	end
	local count, newest = 0, 0
	if alg == GCRA then
		local tol = burst * T
		local tat = stamp(sa, at)
		local base = max(tat, t)
		if kind == TAKE then
			if cost <= burst and base + cost * T - t <= tol then
				tat = base + cost * T
			else
				tat = max(tat, t + tol) -- full, never lowered
			end
		elseif kind == ADD then
			tat = max(tat, min(base + min(cost, 2 * burst) * T, t + 2 * tol))
		elseif kind == REFUND then
			if tat > t then
				if cost > idiv(tat - t, T) then
					tat = t
				else
					tat = tat - cost * T
				end
			end
		end
		at = tat
	elseif alg == TOKEN then
		local cap = burst * period
		local tokens = tokensAt(sa, at, n, t)
		local c = min(cost, 2 * burst)
		if kind == TAKE then
			if cost <= burst and tokens >= cost * period then
				tokens = tokens - cost * period
			else
				tokens = min(tokens, 0)
			end
		elseif kind == ADD then
			tokens = max(tokens - c * period, min(tokens, -cap))
		elseif kind == REFUND then
			local room = cap - tokens
			if room > 0 then
				tokens = tokens + min(c * period, room)
			end
		end
		n = tokens
		at = max(stamp(sa, at), t)
	elseif alg == LEAKY then
		local cap = burst * period
		local level = levelAt(sa, at, n, t)
		local c = min(cost, 2 * burst)
		if kind == TAKE then
			if cost <= burst and level + cost * period <= cap then
				level = level + cost * period
			else
				level = max(level, cap)
			end
		elseif kind == ADD then
			level = min(level + c * period, max(level, 2 * cap))
		elseif kind == REFUND then
			level = max(level - c * period, 0)
		end
		n = level
		at = max(stamp(sa, at), t)
	elseif alg == FIXED then
		local start, cnt = fixedAt(sa, at, n, t)
		at, n, prev = start, consumeCount(cnt), 0
	elseif alg == SLIDING then
		local start, pr, cur = slidingAt(sa, at, n, prev, t)
		if kind == REFUND and cost > cur then
			-- The unit refunded may have been charged in the previous
			-- window, before the boundary passed.
			pr = max(pr - (cost - cur), 0)
		end
		at, n, prev = start, consumeCount(cur), pr
	elseif alg == LOG then
		n, count, newest = consumeLog(sa, n, t, u)
	elseif alg == DISTINCT then
		-- at: the newest score written, which an undo compares with.
		n, count, newest = consumeSet(sa, n, t, u)
		at = newest
	else
		return sa, at, n, prev, 0, 0
	end
	return alg, at, n, prev, count, newest
end

-- Report --------------------------------------------------------------------

-- report is rules' reportState: the units left and the us until the state
-- is back to its full allowance (decayed to empty), its TTL. A
-- sliding_log's count and newest timestamp come from the caller.
local function report(sa, at, n, prev, t, count, newest)
	if alg == GCRA then
		local ahead = max(stamp(sa, at) - t, 0)
		return max(idiv(burst * T - ahead, T), 0), ahead
	elseif alg == TOKEN then
		local tokens = tokensAt(sa, at, n, t)
		local reset = ceildiv(burst * period - tokens, limit)
		if reset > 0 then
			reset = reset + skew(sa, at, t)
		end
		return idiv(max(tokens, 0), period), reset
	elseif alg == LEAKY then
		local level = levelAt(sa, at, n, t)
		local reset = ceildiv(level, limit)
		if reset > 0 then
			reset = reset + skew(sa, at, t)
		end
		return idiv(max(burst * period - level, 0), period), reset
	elseif alg == FIXED then
		local start, cnt = fixedAt(sa, at, n, t)
		if cnt == 0 then
			return limit, 0
		end
		return max(limit - cnt, 0), max(start + period - t, 1)
	elseif alg == SLIDING then
		local p = period
		local start, pr, cur = slidingAt(sa, at, n, prev, t)
		local e = max(t - start, 0)
		local w = pr * (p - e)
		local reset = 0
		if cur > 0 then
			reset = start + 2 * p - t
		elseif w > 0 then
			reset = start + p - t
		end
		return max(limit - cur - ceildiv(w, p), 0), reset
	elseif isSet then
		if count == 0 then
			return limit, 0
		end
		return max(limit - count, 0), newest + period - t
	end
	return 0, 0
end

if hasSet then
	-- reportLog reports a sliding_log op from the sorted set as it is.
	function reportLog(sa, t)
		local count, newest = logCount(sa, t), 0
		if count > 0 then
			newest = logNewest()
		end
		return report(sa, 0, 0, 0, t, count, newest)
	end
end

-- store writes the state, which decays in ttl us, to the op's keys, or
-- deletes them when ttl is 0 (an empty state is not stored). It returns
-- what it wrote.
local function store(sa, at, n, prev, t, ttl)
	if ttl <= 0 then
		if isSet then
			call('DEL', key, lk)
		else
			call('DEL', key)
		end
		return ''
	end
	local raw = format('%.0f:%.0f:%.0f:%.0f:%.0f', sa, t + ttl, at, n, prev)
	local px = str(ceildiv(ttl, 1000) + slack) -- whole ms, rounded up: never 0
	call('SET', key, raw, 'PX', px)
	if isSet then
		call('PEXPIRE', lk, px)
	end
	return raw
end

-- Modes ---------------------------------------------------------------------

-- settle is counter.Settle for the op in use, checked by pass 1 (ok and
-- wait, and count for a sliding_log) against its state (raw: what its key
-- held). It returns remaining, reset_after_us, retry_after_us (shownAfter)
-- and, with the flag, the op's undo payload (0 when none).
local function settle(refused, raw, sa, at, n, prev, ok, wait, count)
	-- (Plain ifs: gopher-lua, miniredis' Lua, miscompiles
	-- "x = a or (b and not c)".)
	-- fresh: the key holds no live state of the op's algorithm (a live
	-- gcra state's TAT is its expiry, after now).
	local fresh = false
	if sa ~= alg then
		fresh = true
	elseif alg == GCRA and at <= now then
		fresh = true
	end
	local consumes = true
	if kind == PEEK then
		consumes = false
	elseif kind == TAKE and not attempts then
		if not ok or refused then
			consumes = false
		end
	elseif kind == TAKE and refused and fresh then
		consumes = false -- an attempt in a refused call makes no new key
	end
	local undoable = false
	if flag and kind == TAKE and consumes then
		if not attempts or fresh then
			undoable = true
		end
	end
	local u
	if undoable then
		-- Another slot may refuse the request: then this key must end as a
		-- call that does not consume leaves it, which is as it is now, or
		-- deleted when that state is empty (an attempt that made a new key
		-- too: rules.Store's contract).
		local newest = 0
		if isSet and count > 0 then
			newest = logNewest()
		end
		local _, ttl = report(sa, at, n, prev, now, count, newest)
		u = { restore = '', added = {}, removed = {} }
		if ttl > 0 then
			u.restore = raw
		end
	end
	local newest = 0
	if consumes then
		sa, at, n, prev, count, newest = consume(sa, at, n, prev, now, u)
	elseif isSet and count > 0 then
		newest = logNewest()
	end
	local remaining, reset = report(sa, at, n, prev, now, count, newest)
	if not ok then
		remaining = 0
	end
	local shownReset, shownWait = shownAfter(ok, wait, sa, at, n, prev, now)
	local written = ''
	if consumes then
		written = store(sa, at, n, prev, now, reset)
	elseif raw and reset == 0 then
		store(sa, at, n, prev, now, 0) -- expired, or another algorithm's: as fresh, not stored
	end
	local pay = 0
	if u then
		pay = { u.restore, written, str(#u.added) }
		for _, m in ipairs(u.added) do
			pay[#pay + 1] = m
		end
		for _, v in ipairs(u.removed) do
			pay[#pay + 1] = v
		end
	end
	return remaining, shownReset, shownWait, pay
end

local function take()
	if now < 0 then
		now = time()
	end
	if nops == 1 then
		-- One op: pass 1 and pass 2 in a row, no tables.
		use(1)
		local raw, sa, at, n, prev = load(now)
		local ok, wait, count = check(sa, at, n, prev, now)
		local refused = false
		if kind == TAKE and enforce and not ok then
			refused = true
		end
		local remaining, reset, retry, pay = settle(refused, raw, sa, at, n, prev, ok, wait, count)
		local allowed = 0
		if ok then
			allowed = 1
		end
		if flag then
			return { now, allowed, remaining, reset, retry, pay }
		end
		return { now, allowed, remaining, reset, retry }
	end

	-- Pass 1: decide every op against the state before the call; keep
	-- each op's raw, state and decision (8 slots an op) for pass 2.
	local refused, kept = false, {}
	for i = 1, nops do
		use(i)
		local raw, sa, at, n, prev = load(now)
		local ok, wait, count = check(sa, at, n, prev, now)
		if kind == TAKE and enforce and not ok then
			refused = true
		end
		local j = 8 * (i - 1)
		kept[j + 1], kept[j + 2], kept[j + 3], kept[j + 4] = raw, sa, at, n
		kept[j + 5], kept[j + 6], kept[j + 7], kept[j + 8] = prev, ok, wait, count
	end

	-- Pass 2: consume per the contract, report the state after, store it.
	-- A set's key may come twice in a call (the values of one request on
	-- one count_distinct key, rules/values.go): the second consumes on
	-- what the first wrote, read again, as the memory store does; pass 1
	-- judged both against the state before the call.
	local out, pays, sets = { now }, {}, nil
	for i = 1, nops do
		use(i)
		local j = 8 * (i - 1)
		local ok = kept[j + 6]
		if isSet then
			if sets == nil then
				sets = {}
			elseif sets[key] then
				kept[j + 1], kept[j + 2], kept[j + 3], kept[j + 4], kept[j + 5] = load(now)
			end
			sets[key] = true
		end
		local remaining, reset, retry, pay = settle(refused, kept[j + 1], kept[j + 2], kept[j + 3], kept[j + 4], kept[j + 5], ok, kept[j + 7], kept[j + 8])
		local allowed = 0
		if ok then
			allowed = 1
		end
		out[#out + 1] = allowed
		out[#out + 1] = remaining
		out[#out + 1] = reset
		out[#out + 1] = retry
		pays[i] = pay
	end
	if flag then
		for i = 1, nops do
			out[#out + 1] = pays[i]
		end
	end
	return out
end

-- The undo mode's functions exist in that mode only.
if mode == 1 then
	-- decode returns the state raw holds (with its expiry x), nil when it
	-- holds none.
	local function decode(raw)
		if not raw then
			return nil
		end
		local a, x, at, n, p = match(raw, stateFormat)
		if not a then
			return nil
		end
		return tonumber(a), tonumber(x), tonumber(at), tonumber(n), tonumber(p)
	end

	-- restore puts the op's key back as the take found it (nothing wrote it
	-- since), and reports it at the take's time t0.
	local function restore(raw, added, removed, t0, t)
		local sa, x, at, n, prev = decode(raw)
		if sa == nil then
			store(0, 0, 0, 0, t, 0)
			local remaining = report(0, 0, 0, 0, t0, 0, 0)
			return remaining, window(0, 0, 0, 0, t0)
		end
		if isSet then
			if #added > 0 then
				zcall('ZREM', added)
			end
			if #removed > 0 then
				local args = {}
				for j = 1, #removed, 2 do
					args[#args + 1] = removed[j + 1]
					args[#args + 1] = removed[j]
				end
				zcall('ZADD', args)
			end
		end
		local ttl = x - t
		if ttl > 0 then
			local px = str(ceildiv(ttl, 1000) + slack)
			call('SET', key, raw, 'PX', px)
			if isSet then
				call('PEXPIRE', lk, px)
			end
		else
			store(sa, at, n, prev, t, 0)
		end
		local remaining
		if isSet then
			remaining = reportLog(sa, t0)
		else
			remaining = report(sa, at, n, prev, t0, 0, 0)
		end
		return remaining, window(sa, at, n, prev, t0)
	end

	-- refundOwn gives back, as of t, the part of what the take wrote (ours)
	-- that is verifiably still in the counter, when other calls wrote it since:
	-- the units not yet refilled, drained or out of their window. It never
	-- gives back more than the take took, so an undo never over-admits. A
	-- distinct value is forgotten (or moved back) while its score is the
	-- take's; one that another request counted again in the same
	-- microsecond cannot be told from it, and is forgotten too: the one
	-- case an undo may give back one value more, which needs two requests
	-- counting one value on one key within a microsecond and a refusal in
	-- another slot.
	local function refundOwn(ours, added, removed, t)
		local oa, _, oat, on = decode(ours)
		local _, sa, at, n, prev = load(t)
		local changed = false
		if oa ~= nil and sa == alg then
			if alg == GCRA then
				local own = min(cost * T, max(oat - t, 0))
				if own > 0 and at > t then
					at = max(at - own, t)
					changed = true
				end
			elseif alg == TOKEN then
				local cap = burst * period
				local own = min(cost * period, cap - tokensAt(oa, oat, on, t))
				local tokens = tokensAt(sa, at, n, t)
				if own > 0 and tokens < cap then
					n = min(tokens + own, cap)
					at = max(at, t)
					changed = true
				end
			elseif alg == LEAKY then
				local own = min(cost * period, levelAt(oa, oat, on, t))
				local level = levelAt(sa, at, n, t)
				if own > 0 and level > 0 then
					n = max(level - own, 0)
					at = max(at, t)
					changed = true
				end
			elseif alg == FIXED then
				local start, cnt = fixedAt(sa, at, n, t)
				if start == oat and cnt > 0 then
					at, n, prev = start, max(cnt - cost, 0), 0
					changed = true
				end
			elseif alg == SLIDING then
				local start, pr, cur = slidingAt(sa, at, n, prev, t)
				if start == oat and cur > 0 then
					at, n, prev = start, max(cur - cost, 0), pr
					changed = true
				elseif start == oat + period and pr > 0 then
					at, n, prev = start, cur, max(pr - cost, 0)
					changed = true
				end
			elseif alg == LOG then
				if #added > 0 and zcall('ZREM', added) > 0 then
					n = n + 1
					changed = true
				end
			elseif alg == DISTINCT then
				-- The member the take counted, if no call has seen it again
				-- since (its score is still the one the take wrote, oat): back
				-- to its old score when it was live before, else forgotten.
				local m = added[1]
				local s = m and call('ZSCORE', lk, m)
				if s and tonumber(s) == oat then
					local old
					for j = 1, #removed, 2 do
						if removed[j] == m then
							old = removed[j + 1]
						end
					end
					if old then
						call('ZADD', lk, old, m)
					else
						call('ZREM', lk, m)
					end
					n = n + 1
					changed = true
				end
			end
		end
		local remaining, reset
		if isSet then
			remaining, reset = reportLog(sa, t)
		else
			remaining, reset = report(sa, at, n, prev, t, 0, 0)
		end
		if changed then
			store(sa, at, n, prev, t, reset)
		end
		return remaining, window(sa, at, n, prev, t)
	end

	local function undo()
		local t0, t = now, now
		if flag then
			t = time()
		end
		local out, ac = {}, base + 1 + width * nops
		for i = 1, nops do
			use(i)
			local m = h[width * i]
			local raw, ours, nadded = ARGV[ac], ARGV[ac + 1], tonumber(ARGV[ac + 2])
			local added, removed = {}, {}
			for j = ac + 3, ac + 2 + nadded do
				added[#added + 1] = ARGV[j]
			end
			for j = ac + 3 + nadded, ac + m - 1 do
				removed[#removed + 1] = ARGV[j]
			end
			ac = ac + m
			local cur = call('GET', key)
			if not cur then
				cur = ''
			end
			local remaining, reset
			if cur == ours then
				remaining, reset = restore(raw, added, removed, t0, t)
			else
				remaining, reset = refundOwn(ours, added, removed, t)
			end
			out[#out + 1] = remaining
			out[#out + 1] = reset
		end
		return out
	end

	return undo()
end

return take()
