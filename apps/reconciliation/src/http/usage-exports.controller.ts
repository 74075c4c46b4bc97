import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Clock, CurrentOperator, InjectClock, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { ImportUsageExport } from '../usecases/import-export/import-export.usecase';
import { importExportBody } from '../usecases/import-export/usage-export';
import { invalidRequest } from '../usecases/invalid-request';
import { schemaOf } from './openapi';

@ApiTags('usage-exports')
@OperatorApi()
@Controller('usage-exports')
export class UsageExportsController {
  constructor(
    private readonly importExport: ImportUsageExport,
    @InjectClock() private readonly clock: Clock,
  ) {}

  @Post()
  @HttpCode(200)
  @ApiOperation({
    summary:
      "Import a provider usage export (JSON lines or CSV, docs/usage-exports.md; at most 5,000 lines per call): each line resolves its attempt's open case, confirms its ledger row, or opens an export_mismatch case; lines matching no attempt are listed. With `complete` (day, routes, export digest) the operator states the export final for those routes and UTC day: their attempts of that day that ended unresolved with no line in any import are settled at zero (evidence provider_export), the statement recorded once. Idempotent. Roles: operator, finance",
  })
  @ApiBody({ schema: schemaOf(importExportBody) })
  @Roles('operator', 'finance')
  import(@CurrentOperator() op: Operator, @Body() body: unknown) {
    const parsed = importExportBody.safeParse(body);
    if (!parsed.success) throw invalidRequest(parsed.error);
    return this.importExport.execute({ ...parsed.data, actor: op.subject }, this.clock.now());
  }
}
