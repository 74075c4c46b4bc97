import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { z } from 'zod';
import { caseReason } from '@gateway/contracts';

/** OpenAPI schema from the zod schema the command validates with, so docs and validation agree. */
export function schemaOf(schema: z.ZodType): SchemaObject {
  const { $schema: _ignored, ...json } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  return json as SchemaObject;
}

const microusd = { type: 'string', pattern: '^-?\\d+$', description: 'integer micro-USD as a decimal string' } as const;

export const caseSchema: SchemaObject = {
  type: 'object',
  properties: {
    case_id: { type: 'string' },
    action_id: { type: 'string' },
    attempt_id: { type: 'string', nullable: true },
    workload_id: { type: 'string', nullable: true },
    reason: { type: 'string', enum: [...caseReason.options], description: 'why the case is open (docs/decisions.md)' },
    status: { type: 'string', enum: ['open', 'resolved'] },
    provider_request_id: { type: 'string', nullable: true },
    exposure_microusd: microusd,
    details: { type: 'object', additionalProperties: true, description: 'counts and codes only' },
    opened_at: { type: 'string', format: 'date-time' },
    resolved_at: { type: 'string', format: 'date-time', nullable: true },
    resolved_by: { type: 'string', nullable: true },
    resolution: { type: 'string', nullable: true },
  },
};

export const exposureSchema: SchemaObject = {
  type: 'object',
  properties: {
    workload_id: { type: 'string', nullable: true },
    accounts: {
      type: 'array',
      items: {
        type: 'object',
        description: 'one budget account; the three amounts are separate and never summed',
        properties: {
          account_id: { type: 'string' },
          scope: { type: 'string', enum: ['workload', 'exception'] },
          scope_id: { type: 'string' },
          period_start: { type: 'string', format: 'date-time' },
          settled_microusd: { ...microusd, description: 'priced from usage evidence' },
          unresolved_microusd: {
            ...microusd,
            description: 'held until evidence or an operator resolves it; may or may not have been billed',
          },
          pending_microusd: { ...microusd, description: 'worst-case holds of actions still running' },
          budget_microusd: microusd,
          updated_at: { type: 'string', format: 'date-time' },
        },
      },
    },
  },
};
