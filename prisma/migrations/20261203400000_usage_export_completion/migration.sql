-- "This export is complete for these routes and this UTC day" (issue 15): an operator's statement,
-- recorded once per (day, routes, export digest); attempts of that day left unresolved with no
-- export line are settled at zero on its word.
CREATE TABLE "usage_export_completion" (
    "id" TEXT NOT NULL,
    "day" DATE NOT NULL,
    "route_ids" TEXT[],
    "export_digest" TEXT NOT NULL,
    "stated_by" TEXT NOT NULL,
    "stated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "usage_export_completion_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "usage_export_completion_day_route_ids_export_digest_key" ON "usage_export_completion"("day", "route_ids", "export_digest");
