-- 018_fence_epoch: the counter behind fences a crash cannot hand out twice (epoch.go). Each pooled
-- connection takes the next epoch when it opens, in a committed transaction of its own, before it
-- claims anything; a claim's fence is at least the epoch in its high 32 bits, so every claim made
-- after a server restart carries a higher fence than any claim made before it, including one the
-- server acknowledged and then lost. One row: the table's key admits only true.
CREATE TABLE {S}.fence_epoch (
	one   boolean PRIMARY KEY DEFAULT true CHECK (one),
	epoch bigint NOT NULL
);
INSERT INTO {S}.fence_epoch (one, epoch) VALUES (true, 0);
