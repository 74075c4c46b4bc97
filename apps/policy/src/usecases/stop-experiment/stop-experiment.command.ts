import { z } from 'zod';
import { text } from '../input';

/** POST /experiments/{id}/stop: why (required; stopping only lowers spend, so it applies at once). */
export const stopExperimentBody = z.object({ reason: text(500) }).strict();
export type StopExperimentCommand = z.output<typeof stopExperimentBody>;
