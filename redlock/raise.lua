-- raise: the write-back of an acquisition's fence to a node whose counter
-- is behind it. ARGV[1] token, ARGV[2] owner, ARGV[3] the fence.
-- Raises the counter to the fence, never lowers it, provided the hold is
-- still ours (else a later holder may have read the counter already).
-- Returns 1 raised (or already there), 0 not ours.
if not is_ours(ARGV[1], ARGV[2]) then return 0 end
raise_to(meta, ARGV[3])
return 1
