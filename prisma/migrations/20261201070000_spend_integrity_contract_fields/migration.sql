-- Spend integrity (issue 8): a route contract declares the price-changing features it prices and
-- the input tokens its estimate adds per media item; a workload opts in to provider-side storage.
ALTER TABLE "route_contract_version" ADD COLUMN "priced_features" TEXT[] DEFAULT ARRAY[]::TEXT[];
ALTER TABLE "route_contract_version" ADD COLUMN "image_input_tokens" INTEGER NOT NULL DEFAULT 1600;
ALTER TABLE "route_contract_version" ADD COLUMN "audio_input_tokens" INTEGER NOT NULL DEFAULT 1000;
ALTER TABLE "route_contract_version" ADD COLUMN "video_input_tokens" INTEGER NOT NULL DEFAULT 3000;
ALTER TABLE "route_contract_version" ADD COLUMN "document_input_tokens" INTEGER NOT NULL DEFAULT 2000;
ALTER TABLE "workload" ADD COLUMN "allow_provider_storage" BOOLEAN NOT NULL DEFAULT false;
