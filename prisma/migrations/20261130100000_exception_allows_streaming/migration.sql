-- An exception may allow multi-candidate streaming (DESIGN §7: denied unless an exception allows it).
ALTER TABLE "candidate_exception" ADD COLUMN "allows_streaming" BOOLEAN NOT NULL DEFAULT false;
