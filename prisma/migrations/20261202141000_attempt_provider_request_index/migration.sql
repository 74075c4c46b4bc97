-- Provider usage exports (issue 15) are matched to attempts by the provider's request id.
CREATE INDEX "attempt_provider_request_id_idx" ON "attempt"("provider_request_id");
