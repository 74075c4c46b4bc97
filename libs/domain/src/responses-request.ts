/**
 * What the OpenAI Responses API can ask of the provider that the gateway cannot reserve, settle
 * or keep private for, refused before anything is reserved:
 *
 * - `background: true` runs the response after the HTTP call returns; the provider is polled or
 *   calls back later, so no attempt could ever be settled from the answer it gives.
 * - `previous_response_id`, `conversation` and `item_reference` input items make the provider
 *   read earlier turns it stored: input the gateway cannot see, so cannot estimate, and which the
 *   provider bills as input tokens. Refused whatever the workload allows (the client sends the
 *   earlier turns in `input` instead).
 * - `store: true` keeps the prompt and answer at the provider, which only a workload with
 *   `allow_provider_storage` may do (the adapter writes `store: false` otherwise).
 */
import type { DenialCode } from './errors';
import { asRecord } from './request-shape';

export interface ResponsesRefusal {
  code: Extract<DenialCode, 'background_not_supported' | 'stored_state_not_supported' | 'provider_storage_not_allowed' | 'invalid_request'>;
  message: string;
  param: string;
}

export function responsesRequestRefusal(body: Record<string, unknown>, opts: { allowProviderStorage: boolean }): ResponsesRefusal | null {
  if (body.background === true) {
    return {
      code: 'background_not_supported',
      message:
        'background responses are not supported: the gateway settles each request from the answer it waits for; send background: false',
      param: 'background',
    };
  }
  for (const field of ['previous_response_id', 'conversation'] as const) {
    if (present(body[field])) {
      return {
        code: 'stored_state_not_supported',
        message: `${field} makes the provider read turns it stored, which the gateway cannot see or reserve for; send the earlier turns in input instead`,
        param: field,
      };
    }
  }
  const items = Array.isArray(body.input) ? body.input : [];
  const ref = items.findIndex((item) => asRecord(item)?.type === 'item_reference');
  if (ref >= 0) {
    return {
      code: 'stored_state_not_supported',
      message:
        'item_reference input items make the provider read items it stored, which the gateway cannot see or reserve for; send the items themselves',
      param: `input[${ref}]`,
    };
  }
  if (body.store === true && !opts.allowProviderStorage) {
    return {
      code: 'provider_storage_not_allowed',
      message:
        'store: true keeps the prompt and answer at the provider, which this workload does not allow (allow_provider_storage); omit store or send store: false',
      param: 'store',
    };
  }
  if (!present(body.input) && !present(body.prompt)) {
    return { code: 'invalid_request', message: 'input is required', param: 'input' };
  }
  return null;
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}
