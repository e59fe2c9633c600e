-- The tables and functions of dlock's PostgreSQL driver (postgreslock).
-- Copy this file into your migrations (goose, golang-migrate, atlas) or
-- call Locker.CreateTable. It makes, for the table name "dlock":
--
--   dlock          one row per lock name ever taken: its fence, the limit
--                  of a semaphore, and a lock's exclusive hold (token,
--                  owner, hold_fence, expires_at; token '' when there is
--                  none). Rows stay after release, so fences never go
--                  back; there is one per name, not per acquisition.
--   dlock_holds    every other hold: a semaphore's permits, a read-write
--                  lock's readers and writers, and the further holds of a
--                  lock by the owner of the hold in its row (reentrancy):
--                  one row each, with token, owner, fence, expiry.
--   dlock_waiters  one row per waiting caller or watcher, while it waits:
--                  a release sends a NOTIFY only when one is there.
--   dlock_acquire  the acquisition, one statement.
--   dlock_release  the release, one statement: it hands a lock on to the
--                  first waiter (dlock_grant).
--   dlock_leave    a waiter that stops waiting, one statement.
--
-- Which table holds what: a lock's hold is in its name's row whenever
-- that row has none live (so an uncontended lock and release each
-- change one row, and its fence is the row's); only a hold of the same
-- owner taken while the row's hold lives goes to dlock_holds, as do all
-- holds of semaphores and read-write locks. Every acquisition of a lock
-- changes its name's row (it bumps the fence), so that acquisitions of
-- one name queue there; the row's "more" is set by one that puts its
-- hold in dlock_holds, and cleared by one that finds none left there,
-- so that the others need not look. Likewise "waited" is set by a
-- waiter's registration and a watch, in the transaction that inserts
-- them (a waiter's holds the row locked), and cleared by a release that
-- finds none: a release of a lock whose row says nobody waits is one
-- plain UPDATE, as is an uncontended acquisition (the driver sends both
-- as plain statements, which call these functions in the other cases).
--
-- Both tables leave half of each page free (fillfactor 50): taking,
-- renewing and releasing change no indexed column, so the new version
-- fits on the same page as a HOT update, with no index entry to add.
--
-- The functions set synchronous_commit by assignment (v := set_config(…)),
-- which PL/pgSQL evaluates without running a query, unlike PERFORM.
--
-- To use another name, replace every "dlock" word in this file with it.
-- Everything is created only when missing, so running it again is safe.

CREATE TABLE IF NOT EXISTS dlock (
	name       text PRIMARY KEY,
	fence      bigint NOT NULL DEFAULT 0,
	lim        integer NOT NULL DEFAULT 0,
	token      text NOT NULL DEFAULT '',                -- the lock's hold in the row, '' for none
	owner      text NOT NULL DEFAULT '',
	hold_fence bigint NOT NULL DEFAULT 0,
	expires_at timestamptz NOT NULL DEFAULT '-infinity',
	more       boolean NOT NULL DEFAULT true,               -- dlock_holds may have more holds of the lock
	waited     boolean NOT NULL DEFAULT true                -- dlock_waiters may have waiters or watchers of it
) WITH (fillfactor = 50);
ALTER TABLE dlock ADD COLUMN IF NOT EXISTS token text NOT NULL DEFAULT ''; -- a table made before it had them
ALTER TABLE dlock ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '';
ALTER TABLE dlock ADD COLUMN IF NOT EXISTS hold_fence bigint NOT NULL DEFAULT 0;
ALTER TABLE dlock ADD COLUMN IF NOT EXISTS expires_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE dlock ADD COLUMN IF NOT EXISTS more boolean NOT NULL DEFAULT true; -- true: the lock's holds of a table made before it are in dlock_holds
ALTER TABLE dlock ADD COLUMN IF NOT EXISTS waited boolean NOT NULL DEFAULT true;
DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = 'dlock'::regclass AND 'fillfactor=50' = ANY(reloptions)) THEN
		ALTER TABLE dlock SET (fillfactor = 50);
	END IF;
END $$;

CREATE TABLE IF NOT EXISTS dlock_holds (
	name       text NOT NULL,
	token      text NOT NULL,
	kind       "char" NOT NULL,
	owner      text NOT NULL DEFAULT '',
	fence      bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (name, token)
) WITH (fillfactor = 50);
DO $$ BEGIN -- a table made before it had this
	IF NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = 'dlock_holds'::regclass AND 'fillfactor=50' = ANY(reloptions)) THEN
		ALTER TABLE dlock_holds SET (fillfactor = 50);
	END IF;
END $$;

CREATE TABLE IF NOT EXISTS dlock_waiters (
	name   text NOT NULL,
	waiter text NOT NULL,
	kind   "char" NOT NULL,  -- l, p, r, w: a waiter of that kind; o: a watcher
	owner  text NOT NULL DEFAULT '',
	since  timestamptz NOT NULL DEFAULT clock_timestamp(),
	until  timestamptz NOT NULL,
	token  text NOT NULL DEFAULT '',    -- a lock's waiter: the token of the hold a release grants it
	ttl_ms bigint NOT NULL DEFAULT 0,   -- and that hold's lease
	PRIMARY KEY (name, waiter)
);
ALTER TABLE dlock_waiters ADD COLUMN IF NOT EXISTS token text NOT NULL DEFAULT ''; -- a table made before it had them
ALTER TABLE dlock_waiters ADD COLUMN IF NOT EXISTS ttl_ms bigint NOT NULL DEFAULT 0;

-- dlock_notify wakes the oldest waiter of p_name, and every watcher of
-- it. Each waiter and watcher is named "<locker>.<n>", and its Locker
-- listens on channel "dlock_<locker>": the NOTIFY goes to that one
-- session, with payload "<waiter> <name>" ("* <name>" for watchers), so a
-- release wakes one process however many wait. It sends nothing when
-- nobody waits or watches.
CREATE OR REPLACE FUNCTION dlock_notify(p_name text, p_waiters boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	w text;
BEGIN
	IF p_waiters THEN
		SELECT waiter INTO w FROM dlock_waiters
		WHERE name = p_name AND kind <> 'o' AND until > now()
		ORDER BY since, waiter LIMIT 1;
		IF w IS NOT NULL THEN
			PERFORM pg_notify('dlock_' || split_part(w, '.', 1), w || ' ' || p_name);
		END IF;
	END IF;
	FOR w IN SELECT DISTINCT split_part(waiter, '.', 1) FROM dlock_waiters
	         WHERE name = p_name AND kind = 'o' AND until > now() LOOP
		PERFORM pg_notify('dlock_' || w, '* ' || p_name);
	END LOOP;
END $$;

-- dlock_busy returns how long the first hold in the way of an acquisition
-- of kind p_kind by p_owner has left (a lock, a write lock: the longest;
-- a permit: the shortest), or NULL when nothing is in the way. It reads
-- the committed holds as of now, and with p_share locks them FOR SHARE,
-- so that their release waits for the caller's transaction.
CREATE OR REPLACE FUNCTION dlock_busy(p_name text, p_kind "char", p_owner text, p_limit integer, p_waiter text, p_share boolean) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
	left_ms bigint;
	row_ms bigint;
BEGIN
	IF p_kind = 'p' THEN
		IF p_share THEN
			PERFORM 1 FROM dlock_holds WHERE name = p_name AND expires_at > now() FOR SHARE;
		END IF;
		SELECT count(*), ceil(extract(epoch FROM min(expires_at) - now()) * 1000) INTO n, left_ms
		FROM dlock_holds WHERE name = p_name AND expires_at > now();
		IF n >= p_limit THEN
			RETURN greatest(left_ms, 1);
		END IF;
		RETURN NULL;
	END IF;
	IF p_share THEN
		IF p_kind = 'l' THEN
			PERFORM 1 FROM dlock
			WHERE name = p_name AND token <> '' AND expires_at > now() AND (p_owner = '' OR owner <> p_owner)
			FOR SHARE;
		END IF;
		PERFORM 1 FROM dlock_holds
		WHERE name = p_name AND expires_at > now()
		  AND (p_owner = '' OR owner <> p_owner) AND (p_kind <> 'r' OR kind = 'w')
		FOR SHARE;
	END IF;
	SELECT ceil(extract(epoch FROM max(expires_at) - now()) * 1000) INTO left_ms
	FROM dlock_holds
	WHERE name = p_name AND expires_at > now()
	  AND (p_owner = '' OR owner <> p_owner) AND (p_kind <> 'r' OR kind = 'w');
	IF p_kind = 'l' THEN -- and the hold in the name's row
		SELECT ceil(extract(epoch FROM expires_at - now()) * 1000) INTO row_ms
		FROM dlock WHERE name = p_name AND token <> '' AND expires_at > now() AND (p_owner = '' OR owner <> p_owner);
		left_ms := greatest(left_ms, row_ms);
	END IF;
	IF left_ms IS NOT NULL THEN
		RETURN greatest(left_ms, 1);
	END IF;
	IF p_kind = 'r' THEN
		-- a writer that waits holds back the readers that come after it
		IF EXISTS (SELECT 1 FROM dlock_waiters w
		           WHERE w.name = p_name AND w.kind = 'w' AND w.until > now()
		             AND (p_owner = '' OR w.owner <> p_owner)
		             AND w.since < coalesce((SELECT since FROM dlock_waiters
		                                     WHERE name = p_name AND waiter = p_waiter), 'infinity')) THEN
			RETURN 1;
		END IF;
	END IF;
	RETURN NULL;
END $$;

-- dlock_acquire makes one attempt to take p_name for p_ttl_ms
-- milliseconds, as a hold of kind p_kind ('l' lock, 'p' permit of a
-- semaphore of p_limit, 'r' read, 'w' write) with token p_token. It
-- returns the hold's fence, or 0 and the time the holder in the way has
-- left (-1: the owner holds the read lock and asks for the write lock). A
-- caller that waits names itself in p_waiter ('' for none): a busy
-- attempt then registers it for p_wait_ms, so that a release wakes it,
-- and an acquisition removes it. A waiter for a lock also gives p_grant,
-- the token of the hold a release may grant it (see dlock_grant): an
-- attempt that finds that hold takes it, renewed to p_ttl_ms, and returns
-- its fence with retry_ms -2.
DROP FUNCTION IF EXISTS dlock_acquire(text, text, "char", text, bigint, integer, text, bigint); -- before p_grant
CREATE OR REPLACE FUNCTION dlock_acquire(p_name text, p_token text, p_kind "char", p_owner text,
	p_ttl_ms bigint, p_limit integer, p_waiter text, p_wait_ms bigint, p_grant text,
	OUT fence bigint, OUT retry_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
	bumped bigint;    -- the fence the first statement bumped, if it did
	took bigint;      -- the fence of the hold it inserted, if it did
	watched boolean;  -- a watcher waits for news of the name
	until timestamptz; -- a lock's: when the last hold in the way lapses
	live boolean;     -- a lock's: the hold in its name's row is live
	v text;
BEGIN
	fence := 0;
	IF p_grant <> '' THEN
		-- A release granted it (its NOTIFY may have been lost): take it.
		UPDATE dlock AS d SET expires_at = now() + p_ttl_ms * interval '1 millisecond'
		WHERE d.name = p_name AND d.token = p_grant AND d.expires_at > now()
		RETURNING d.hold_fence INTO fence;
		IF NOT FOUND THEN -- a grant made before locks' holds moved into their name's row
			UPDATE dlock_holds AS h SET expires_at = now() + p_ttl_ms * interval '1 millisecond'
			WHERE h.name = p_name AND h.token = p_grant AND h.expires_at > now()
			RETURNING h.fence INTO fence;
		END IF;
		IF FOUND THEN
			DELETE FROM dlock_waiters WHERE name = p_name AND (waiter = p_waiter OR token = p_grant);
			retry_ms := -2;
			RETURN;
		END IF;
		fence := 0;
	END IF;
	IF p_kind = 'l' THEN
		-- One statement takes a lock that is free: the name's row has no
		-- live hold and no other hold of the lock is in dlock_holds
		-- (more). It waits for an acquisition or release of the name in
		-- flight, and then reads the row's newest version.
		UPDATE dlock AS d SET fence = d.fence + 1, hold_fence = d.fence + 1, token = p_token, owner = p_owner,
		       expires_at = now() + p_ttl_ms * interval '1 millisecond'
		WHERE d.name = p_name AND NOT d.more AND (d.token = '' OR d.expires_at <= now())
		RETURNING d.fence, d.waited
		INTO took, watched;
		IF took IS NULL THEN
			-- The name's first acquisition makes its row. Nobody waits for
			-- it yet: a waiter registers on the row, and a watch makes it
			-- (or sets waited once this transaction ends).
			INSERT INTO dlock AS d (name, fence, hold_fence, token, owner, expires_at, more, waited)
			VALUES (p_name, 1, 1, p_token, p_owner, now() + p_ttl_ms * interval '1 millisecond', false, false)
			ON CONFLICT (name) DO NOTHING
			RETURNING d.fence, EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name AND kind = 'o')
			INTO took, watched;
		END IF;
		IF took IS NULL AND p_waiter = '' THEN
			-- A busy lock is answered without a write.
			SELECT greatest(
				(SELECT d.expires_at FROM dlock AS d
				 WHERE d.name = p_name AND d.token <> '' AND d.expires_at > now() AND (p_owner = '' OR d.owner <> p_owner)),
				(SELECT max(h.expires_at) FROM dlock_holds AS h
				 WHERE h.name = p_name AND h.expires_at > now() AND (p_owner = '' OR h.owner <> p_owner)))
			INTO until;
			IF until IS NOT NULL THEN
				retry_ms := greatest(ceil(extract(epoch FROM until - now()) * 1000), 1);
				RETURN;
			END IF;
		END IF;
		IF took IS NULL THEN
			-- The slow way: lock the name's row (acquisitions of one name
			-- queue there), delete lapsed holds, look again.
			SELECT d.token <> '' AND d.expires_at > now(),
			       CASE WHEN d.token <> '' AND d.expires_at > now() AND (p_owner = '' OR d.owner <> p_owner)
			            THEN ceil(extract(epoch FROM d.expires_at - now()) * 1000) END
			INTO live, retry_ms
			FROM dlock AS d WHERE d.name = p_name FOR UPDATE;
			IF FOUND THEN -- (the insert above found it there)
				DELETE FROM dlock_holds WHERE name = p_name AND expires_at <= now();
				SELECT greatest(retry_ms, ceil(extract(epoch FROM max(expires_at) - now()) * 1000)) INTO retry_ms -- >= 1: expires_at > now()
				FROM dlock_holds WHERE name = p_name AND expires_at > now() AND (p_owner = '' OR owner <> p_owner);
				IF retry_ms IS NULL AND live THEN
					-- The owner's own hold is in the row: this one goes beside it.
					UPDATE dlock AS d SET fence = d.fence + 1, more = true WHERE d.name = p_name RETURNING d.fence INTO took;
					INSERT INTO dlock_holds (name, token, kind, owner, fence, expires_at)
					VALUES (p_name, p_token, 'l', p_owner, took, now() + p_ttl_ms * interval '1 millisecond');
				ELSIF retry_ms IS NULL THEN
					UPDATE dlock AS d SET fence = d.fence + 1, hold_fence = d.fence + 1, token = p_token, owner = p_owner,
					       expires_at = now() + p_ttl_ms * interval '1 millisecond',
					       more = EXISTS (SELECT 1 FROM dlock_holds WHERE name = p_name) -- its owner's
					WHERE d.name = p_name RETURNING d.fence INTO took;
				END IF;
			END IF;
			watched := EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name AND kind = 'o');
		END IF;
		IF took IS NOT NULL THEN
			fence := took;
			retry_ms := NULL;
			IF p_waiter <> '' OR p_grant <> '' THEN
				DELETE FROM dlock_waiters WHERE name = p_name AND (waiter = p_waiter OR (p_grant <> '' AND token = p_grant));
			END IF;
			IF watched THEN
				PERFORM dlock_notify(p_name, false);
			END IF;
			RETURN;
		END IF;
		IF p_waiter = '' THEN
			RETURN;
		END IF;
	ELSE
		IF p_kind = 'w' AND p_owner <> '' THEN
			IF EXISTS (SELECT 1 FROM dlock_holds
				WHERE name = p_name AND kind = 'r' AND owner = p_owner AND expires_at > now()) THEN
				retry_ms := -1; -- a reader does not become a writer: it would wait on itself
				RETURN;
			END IF;
		END IF;
		-- A busy key is answered without a write, unless the caller waits.
		IF p_kind = 'w' THEN
			-- One statement answers, and takes a key that is free: it reads
			-- dlock_busy's answer for a write lock (r.busy, >= 1:
			-- expires_at > now()), whether lapsed holds are there to delete,
			-- and the name's fence (r.seen), in one snapshot; when nothing is
			-- in the way it bumps the fence (f), and inserts the hold (i) when
			-- the bumped fence is one above the one read and no lapsed hold is
			-- there. Every hold is inserted by a transaction that bumps its
			-- name's fence, and the update waits for any other that does and
			-- then bumps the newest fence: one above r.seen means that no hold
			-- came after the snapshot, so that its answer stands.
			WITH r AS (
				SELECT ceil(extract(epoch FROM max(h.expires_at) FILTER (WHERE h.expires_at > now() AND (p_owner = '' OR h.owner <> p_owner)) - now()) * 1000) AS busy,
				       coalesce(bool_or(h.expires_at <= now()), false) AS stale,
				       coalesce((SELECT d.fence FROM dlock AS d WHERE d.name = p_name), 0) AS seen
				FROM dlock_holds AS h WHERE h.name = p_name
			), f AS (
				UPDATE dlock AS d SET fence = d.fence + 1 FROM r
				WHERE d.name = p_name AND r.busy IS NULL
				RETURNING d.fence
			), i AS (
				INSERT INTO dlock_holds (name, token, kind, owner, fence, expires_at)
				SELECT p_name, p_token, p_kind, p_owner, f.fence, now() + p_ttl_ms * interval '1 millisecond'
				FROM f, r WHERE f.fence = r.seen + 1 AND NOT r.stale
				RETURNING dlock_holds.fence
			)
			SELECT r.busy, (SELECT f.fence FROM f), (SELECT i.fence FROM i),
			       EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name AND kind = 'o')
			INTO retry_ms, bumped, took, watched
			FROM r;
		ELSE
			retry_ms := dlock_busy(p_name, p_kind, p_owner, p_limit, p_waiter, false);
		END IF;
		IF retry_ms IS NOT NULL AND p_waiter = '' THEN
			RETURN;
		END IF;
		IF retry_ms IS NULL THEN
			IF took IS NOT NULL THEN
				fence := took;
			ELSE
				-- The slow way: take the name's row and bump its fence, unless
				-- the statement above did (acquisitions of one name queue
				-- there); delete lapsed holds; look again.
				fence := bumped;
				IF fence IS NULL THEN
					UPDATE dlock AS d SET fence = d.fence + 1 WHERE d.name = p_name RETURNING d.fence INTO fence;
				END IF;
				IF fence IS NULL THEN -- the name's first acquisition
					INSERT INTO dlock AS d (name, fence) VALUES (p_name, 1)
					ON CONFLICT (name) DO UPDATE SET fence = d.fence + 1
					RETURNING d.fence INTO fence;
				END IF;
				DELETE FROM dlock_holds WHERE name = p_name AND expires_at <= now();
				IF p_kind = 'w' THEN -- dlock_busy's answer for it, without a call
					SELECT ceil(extract(epoch FROM max(expires_at) - now()) * 1000) INTO retry_ms -- >= 1: expires_at > now()
					FROM dlock_holds WHERE name = p_name AND expires_at > now() AND (p_owner = '' OR owner <> p_owner);
				ELSE
					retry_ms := dlock_busy(p_name, p_kind, p_owner, p_limit, p_waiter, false);
				END IF;
				IF retry_ms IS NULL THEN
					IF p_kind = 'p' THEN
						UPDATE dlock SET lim = p_limit WHERE name = p_name AND lim <> p_limit;
					END IF;
					INSERT INTO dlock_holds (name, token, kind, owner, fence, expires_at)
					VALUES (p_name, p_token, p_kind, p_owner, fence, now() + p_ttl_ms * interval '1 millisecond')
					RETURNING EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name AND kind = 'o') INTO watched;
				END IF;
			END IF;
			IF retry_ms IS NULL THEN
				IF p_waiter <> '' OR p_grant <> '' THEN
					DELETE FROM dlock_waiters WHERE name = p_name AND (waiter = p_waiter OR (p_grant <> '' AND token = p_grant));
					IF p_kind IN ('p', 'r') THEN
						PERFORM dlock_notify(p_name, true); -- the next may come in too
					END IF;
				END IF;
				IF watched THEN
					PERFORM dlock_notify(p_name, false);
				END IF;
				RETURN;
			END IF;
			-- Taken meanwhile: the fence goes back, as no other transaction
			-- saw the bumped value (the row is locked until this one ends).
			UPDATE dlock SET fence = dlock.fence - 1 WHERE name = p_name;
			fence := 0;
			IF p_waiter = '' THEN
				RETURN;
			END IF;
		END IF;
	END IF;
	-- Busy, and the caller waits. This transaction acquires nothing: it
	-- only registers the waiter, which a crash may lose (the waiter's
	-- fallback attempt covers that), so its commit does not wait for the
	-- WAL to reach the disk. An acquisition's commit always does: one lost
	-- in a crash could hand out its fence twice.
	v := set_config('synchronous_commit', 'off', true);
	-- Lock the holds in its way, so that their release waits for this
	-- transaction and then finds the waiter.
	retry_ms := dlock_busy(p_name, p_kind, p_owner, p_limit, p_waiter, true);
	IF p_grant <> '' AND (EXISTS (SELECT 1 FROM dlock WHERE name = p_name AND token = p_grant)
	                      OR EXISTS (SELECT 1 FROM dlock_holds WHERE name = p_name AND token = p_grant)) THEN
		-- The release it waited for granted it the lock meanwhile: the
		-- next attempt, a millisecond away, takes it (this transaction's
		-- commit is not durable, so it renews nothing).
		retry_ms := 1;
		RETURN;
	END IF;
	INSERT INTO dlock_waiters AS w (name, waiter, kind, owner, until, token, ttl_ms)
	VALUES (p_name, p_waiter, p_kind, p_owner, now() + p_wait_ms * interval '1 millisecond', p_grant, p_ttl_ms)
	ON CONFLICT (name, waiter) DO UPDATE SET until = EXCLUDED.until, token = EXCLUDED.token, ttl_ms = EXCLUDED.ttl_ms;
	IF p_kind = 'l' THEN -- its row is locked (the slow way above)
		UPDATE dlock SET waited = true WHERE name = p_name AND NOT waited;
	END IF;
	IF retry_ms IS NULL THEN
		-- freed meanwhile: wake the first waiter, which may be this one
		PERFORM dlock_notify(p_name, true);
		retry_ms := 1;
	END IF;
END $$;

-- dlock_grant hands the lock p_name, just released, to its first waiter
-- that gave a token: in the release's transaction, it bumps the fence,
-- puts the waiter's hold in the name's row, removes its registration and NOTIFYs it
-- alone, with payload "<waiter>=<fence> <name>", so that its wake-up needs
-- no acquisition. It returns false, changing nothing, when the name is
-- still held (another hold of the same owner) or no such waiter is there.
--
-- The hold's lease counts from clock_timestamp(), taken after the
-- waiter's registration became visible here, so after the waiter sent the
-- attempt that registered it: the waiter counts its lease from then. The
-- grant makes a fence, so the transaction's commit waits for its WAL (the
-- caller leaves synchronous_commit as the server has it): a grant a crash
-- lost could hand the same fence out again, and its NOTIFY goes out only
-- once the commit is durable.
--
-- A waiter that left, died or missed the NOTIFY: its hold is renewed by
-- nobody and lapses within its lease, unless the waiter's next attempt
-- takes it (dlock_acquire's p_grant) or its leaving hands it on
-- (dlock_leave).
CREATE OR REPLACE FUNCTION dlock_grant(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	w record;
	f bigint;
BEGIN
	-- Grants and acquisitions of one name queue on its row (a release
	-- that emptied the row holds it already). An acquisition that holds
	-- it may next lock the hold this release just deleted from
	-- dlock_holds (to register as a waiter): waiting for it would be a
	-- deadlock. So the release grants nothing then, and wakes the first
	-- waiter instead (dlock_release).
	PERFORM 1 FROM dlock WHERE name = p_name FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF EXISTS (SELECT 1 FROM dlock WHERE name = p_name AND token <> '' AND expires_at > now())
	   OR EXISTS (SELECT 1 FROM dlock_holds WHERE name = p_name AND expires_at > now()) THEN
		RETURN false;
	END IF;
	-- The grant takes the first waiter's registration before it hands it
	-- the lock: a waiter that is leaving meanwhile (its deletion not yet
	-- committed) holds up the DELETE until it left, which then finds
	-- nothing, and the next waiter is taken instead (each statement reads
	-- the waiters anew).
	LOOP
		SELECT waiter, token, owner, ttl_ms INTO w FROM dlock_waiters
		WHERE name = p_name AND kind = 'l' AND token <> '' AND ttl_ms > 0 AND until > now()
		ORDER BY since, waiter LIMIT 1;
		IF NOT FOUND THEN
			RETURN false;
		END IF;
		DELETE FROM dlock_waiters WHERE name = p_name AND waiter = w.waiter;
		EXIT WHEN FOUND;
	END LOOP;
	DELETE FROM dlock_holds WHERE name = p_name AND expires_at <= now(); -- none is live
	UPDATE dlock AS d SET fence = d.fence + 1, hold_fence = d.fence + 1, token = w.token, owner = w.owner,
	       expires_at = clock_timestamp() + w.ttl_ms * interval '1 millisecond', more = false
	WHERE d.name = p_name RETURNING d.fence INTO f;
	PERFORM pg_notify('dlock_' || split_part(w.waiter, '.', 1), w.waiter || '=' || f || ' ' || p_name);
	IF EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name AND kind = 'o') THEN
		PERFORM dlock_notify(p_name, false);
	END IF;
	RETURN true;
END $$;

-- dlock_release ends the hold of p_name with token p_token (it empties
-- the name's row of it, or deletes it from dlock_holds), and hands
-- a lock on to its first waiter (dlock_grant), or wakes the oldest waiter
-- and the watchers. It returns whether the hold was there: deleting it
-- again finds nothing and changes nothing.
--
-- Unless it grants, its commit does not wait for the WAL to reach the
-- disk (synchronous_commit off for its own transaction): one lost in a
-- crash leaves the row to lapse at its lease, which delays the next
-- holder but never lets two hold at once, and its NOTIFY goes out at
-- once. The acquisition that follows it waits for its own WAL, which
-- comes after the release's, so it makes the release durable too.
CREATE OR REPLACE FUNCTION dlock_release(p_name text, p_token text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	k "char";
	in_row boolean; -- the hold was in the name's row
	v text;
BEGIN
	UPDATE dlock SET token = '' WHERE name = p_name AND token = p_token AND p_token <> ''
	RETURNING true INTO in_row;
	IF in_row THEN
		k := 'l';
	ELSE
		DELETE FROM dlock_holds WHERE name = p_name AND token = p_token RETURNING kind INTO k;
		IF NOT FOUND THEN
			v := set_config('synchronous_commit', 'off', true);
			RETURN false;
		END IF;
	END IF;
	-- A statement of its own: it reads the waiters as of after the
	-- statement above, which may have waited for the registration of one
	-- (it locks the holds in its way); the statement's own snapshot is
	-- from before that wait.
	IF EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name) THEN
		IF k = 'l' AND dlock_grant(p_name) THEN
			RETURN true;
		END IF;
		v := set_config('synchronous_commit', 'off', true);
		PERFORM dlock_notify(p_name, true);
		RETURN true;
	END IF;
	IF in_row THEN
		-- Nobody waits: the next release need not look. (A registration
		-- waits for the row, which the update above locked, and sets it
		-- again.)
		UPDATE dlock SET waited = false WHERE name = p_name AND waited;
	END IF;
	v := set_config('synchronous_commit', 'off', true);
	RETURN true;
END $$;

-- dlock_leave removes the registration of p_waiter, which stops waiting
-- for p_name, and hands on the hold a release may have granted it
-- meanwhile (token p_grant). Unless it hands one on, its commit does not
-- wait for the WAL: a registration a crash brings back lapses.
CREATE OR REPLACE FUNCTION dlock_leave(p_name text, p_waiter text, p_grant text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	v text;
BEGIN
	DELETE FROM dlock_waiters WHERE name = p_name AND waiter = p_waiter;
	IF p_grant <> '' AND (EXISTS (SELECT 1 FROM dlock WHERE name = p_name AND token = p_grant)
	                      OR EXISTS (SELECT 1 FROM dlock_holds WHERE name = p_name AND token = p_grant)) THEN
		PERFORM dlock_release(p_name, p_grant);
		RETURN;
	END IF;
	v := set_config('synchronous_commit', 'off', true);
END $$;
