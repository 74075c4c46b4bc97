import type { SchemaObject } from '@nestjs/swagger';
import { z } from 'zod';

/** The OpenAPI schema of a request body, derived from the zod schema that validates it. */
export function bodySchema(schema: z.ZodTypeAny): SchemaObject {
  const { $schema: _ignored, ...json } = z.toJSONSchema(schema, { io: 'input', target: 'openapi-3.0', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return json as SchemaObject;
}
