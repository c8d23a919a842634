-- Issue #30 (ADR 0038): when each count of bytes in flight was written. A running
-- response's bytes are as of its process's last write, up to a second back; the
-- self-sizing slots read a held slot's pace over the time its bytes cover, not up to
-- the tick, which read every pace low by up to a second of its bytes. NULL: written by
-- a version before this one (its pace is read up to the tick, as before).
ALTER TABLE range_share ADD COLUMN in_flight_at double precision;
