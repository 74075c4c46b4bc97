-- A route contract names the upstream credential dispatch uses (the name only; the value lives in
-- dispatch's environment or secrets file, never in Postgres).
ALTER TABLE "route_contract_version" ADD COLUMN "credential_ref" TEXT;
