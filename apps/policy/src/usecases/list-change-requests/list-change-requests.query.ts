import { z } from 'zod';

/** GET /change-requests?status=&limit= */
export const changeRequestListQuery = z
  .object({
    status: z.enum(['pending', 'approved', 'rejected']).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict()
  .transform((q) => ({ status: q.status ?? null, limit: q.limit }));
