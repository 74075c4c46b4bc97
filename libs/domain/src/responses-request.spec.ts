import { responsesRequestRefusal } from './responses-request';

describe('responsesRequestRefusal', () => {
  const strict = { allowProviderStorage: false };
  const storing = { allowProviderStorage: true };

  it.each<[string, Record<string, unknown>, { allowProviderStorage: boolean }, string, string]>([
    ['background runs', { input: 'q', background: true }, storing, 'background_not_supported', 'background'],
    ['previous_response_id', { input: 'q', previous_response_id: 'resp_1' }, storing, 'stored_state_not_supported', 'previous_response_id'],
    ['a stored conversation (id)', { input: 'q', conversation: 'conv_1' }, storing, 'stored_state_not_supported', 'conversation'],
    [
      'a stored conversation (object)',
      { input: 'q', conversation: { id: 'conv_1' } },
      storing,
      'stored_state_not_supported',
      'conversation',
    ],
    [
      'an item reference',
      {
        input: [
          { role: 'user', content: 'q' },
          { type: 'item_reference', id: 'msg_1' },
        ],
      },
      storing,
      'stored_state_not_supported',
      'input[1]',
    ],
    ['store: true without allow_provider_storage', { input: 'q', store: true }, strict, 'provider_storage_not_allowed', 'store'],
    ['no input at all', { model: 'm' }, strict, 'invalid_request', 'input'],
    [
      'previous_response_id without input (the stored state is the reason)',
      { previous_response_id: 'r' },
      strict,
      'stored_state_not_supported',
      'previous_response_id',
    ],
  ])('refuses %s', (_name, body, opts, code, param) => {
    expect(responsesRequestRefusal(body, opts)).toMatchObject({ code, param });
  });

  it.each<[string, Record<string, unknown>, { allowProviderStorage: boolean }]>([
    ['a plain string input', { input: 'q' }, strict],
    ['background: false and null state fields', { input: 'q', background: false, previous_response_id: null, conversation: null }, strict],
    ['store: false', { input: [{ role: 'user', content: 'q' }], store: false }, strict],
    ['store: true on a workload that allows provider storage', { input: 'q', store: true }, storing],
    ['a stored prompt template (left to the input estimate: unpriced_input)', { prompt: { id: 'pmpt_1' } }, strict],
  ])('lets %s through', (_name, body, opts) => {
    expect(responsesRequestRefusal(body, opts)).toBeNull();
  });
});
