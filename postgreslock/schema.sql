-- The tables and functions of dlock's PostgreSQL driver (postgreslock).
-- Copy this file into your migrations (goose, golang-migrate, atlas) or
-- call Locker.CreateTable. It makes, for the table name "dlock":
--
--   dlock          one row per lock name ever taken: its fence, the limit
--                  of a semaphore. Rows stay after release, so fences never
--                  go back; there is one per name, not per acquisition.
--   dlock_holds    one row per hold: token, owner, fence, expiry in the
--                  server's time.
--   dlock_waiters  one row per waiting caller or watcher, while it waits:
--                  a release sends a NOTIFY only when one is there.
--   dlock_acquire  the acquisition, one statement.
--   dlock_release  the release, one statement.
--
-- dlock_holds leaves half of each page free (fillfactor 50): a renewal
-- changes only expires_at, which no index holds, so the new version fits
-- on the same page as a HOT update, with no index entry to add.
--
-- To use another name, replace every "dlock" word in this file with it.
-- Everything is created only when missing, so running it again is safe.

CREATE TABLE IF NOT EXISTS dlock (
	name  text PRIMARY KEY,
	fence bigint NOT NULL DEFAULT 0,
	lim   integer NOT NULL DEFAULT 0
);

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
	PRIMARY KEY (name, waiter)
);

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
		PERFORM 1 FROM dlock_holds
		WHERE name = p_name AND expires_at > now()
		  AND (p_owner = '' OR owner <> p_owner) AND (p_kind <> 'r' OR kind = 'w')
		FOR SHARE;
	END IF;
	SELECT ceil(extract(epoch FROM max(expires_at) - now()) * 1000) INTO left_ms
	FROM dlock_holds
	WHERE name = p_name AND expires_at > now()
	  AND (p_owner = '' OR owner <> p_owner) AND (p_kind <> 'r' OR kind = 'w');
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
-- left (-1: the owner holds the read lock and asks for the write lock). A caller that waits names itself in p_waiter ('' for none): a busy
-- attempt then registers it for p_wait_ms, so that a release wakes it,
-- and an acquisition removes it.
CREATE OR REPLACE FUNCTION dlock_acquire(p_name text, p_token text, p_kind "char", p_owner text,
	p_ttl_ms bigint, p_limit integer, p_waiter text, p_wait_ms bigint,
	OUT fence bigint, OUT retry_ms bigint)
LANGUAGE plpgsql AS $$
BEGIN
	fence := 0;
	IF p_kind = 'w' AND p_owner <> '' AND EXISTS (SELECT 1 FROM dlock_holds
		WHERE name = p_name AND kind = 'r' AND owner = p_owner AND expires_at > now()) THEN
		retry_ms := -1; -- a reader does not become a writer: it would wait on itself
		RETURN;
	END IF;
	-- A busy key is answered without a write, unless the caller waits.
	IF p_kind IN ('l', 'w') THEN -- dlock_busy's answer for them, without a call
		SELECT ceil(extract(epoch FROM max(expires_at) - now()) * 1000) INTO retry_ms -- >= 1: expires_at > now()
		FROM dlock_holds WHERE name = p_name AND expires_at > now() AND (p_owner = '' OR owner <> p_owner);
	ELSE
		retry_ms := dlock_busy(p_name, p_kind, p_owner, p_limit, p_waiter, false);
	END IF;
	IF retry_ms IS NOT NULL AND p_waiter = '' THEN
		RETURN;
	END IF;
	IF retry_ms IS NULL THEN
		-- Take the name's row and bump its fence in one write: acquisitions
		-- of one name queue here.
		INSERT INTO dlock AS d (name, fence) VALUES (p_name, 1)
		ON CONFLICT (name) DO UPDATE SET fence = d.fence + 1
		RETURNING d.fence INTO fence;
		DELETE FROM dlock_holds WHERE name = p_name AND expires_at <= now();
		IF p_kind IN ('l', 'w') THEN -- dlock_busy's answer for them, without a call
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
			VALUES (p_name, p_token, p_kind, p_owner, fence, now() + p_ttl_ms * interval '1 millisecond');
			IF p_waiter <> '' THEN
				DELETE FROM dlock_waiters WHERE name = p_name AND waiter = p_waiter;
				IF p_kind IN ('p', 'r') THEN
					PERFORM dlock_notify(p_name, true); -- the next may come in too
				END IF;
			END IF;
			IF EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name AND kind = 'o') THEN
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
	-- Busy, and the caller waits. This transaction acquires nothing: it
	-- only registers the waiter, which a crash may lose (the waiter's
	-- fallback attempt covers that), so its commit does not wait for the
	-- WAL to reach the disk. An acquisition's commit always does: one lost
	-- in a crash could hand out its fence twice.
	PERFORM set_config('synchronous_commit', 'off', true);
	-- Lock the holds in its way, so that their release waits for this
	-- transaction and then finds the waiter.
	retry_ms := dlock_busy(p_name, p_kind, p_owner, p_limit, p_waiter, true);
	INSERT INTO dlock_waiters AS w (name, waiter, kind, owner, until)
	VALUES (p_name, p_waiter, p_kind, p_owner, now() + p_wait_ms * interval '1 millisecond')
	ON CONFLICT (name, waiter) DO UPDATE SET until = EXCLUDED.until;
	IF retry_ms IS NULL THEN
		-- freed meanwhile: wake the first waiter, which may be this one
		PERFORM dlock_notify(p_name, true);
		retry_ms := 1;
	END IF;
END $$;

-- dlock_release deletes the hold of p_name with token p_token, and wakes
-- the oldest waiter and the watchers. It returns whether the hold was
-- there: deleting it again finds nothing and changes nothing.
CREATE OR REPLACE FUNCTION dlock_release(p_name text, p_token text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM dlock_holds WHERE name = p_name AND token = p_token;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF EXISTS (SELECT 1 FROM dlock_waiters WHERE name = p_name) THEN
		PERFORM dlock_notify(p_name, true);
	END IF;
	RETURN true;
END $$;
