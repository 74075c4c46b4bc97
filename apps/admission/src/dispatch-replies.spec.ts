import { randomBytes, randomUUID } from 'node:crypto';
import type { DispatchReplyEnvelopeV1, DispatchReplyV1 } from '@gateway/contracts';
import { ContentCipher, PoisonMessageError, ReplyRouter } from '@gateway/messaging';
import { DispatchRepliesIntake, type ServiceConfig } from '@gateway/service-kit';
import { responseReply } from '@gateway/testing';

/** Admission's intake of dispatch replies (libs/service-kit `DispatchRepliesIntake`), with a real cipher and router. */
describe('DispatchRepliesIntake', () => {
  const cipher = new ContentCipher(randomBytes(32));
  const router = new ReplyRouter();
  const intake = new DispatchRepliesIntake(router, cipher, { instanceId: 'admission-1' } as ServiceConfig);
  const now = new Date();
  const later = new Date(now.getTime() + 60_000);

  function envelope(actionId: string, opts: { replyTo?: string; body?: DispatchReplyEnvelopeV1['body'] } = {}): DispatchReplyEnvelopeV1 {
    return {
      event_id: randomUUID(),
      action_id: actionId,
      reply_to: opts.replyTo ?? 'admission-1',
      body: opts.body ?? cipher.encrypt(responseReply({ ok: actionId }), actionId),
    };
  }

  function waitFor(actionId: string): DispatchReplyV1[] {
    const heard: DispatchReplyV1[] = [];
    router.listen(
      actionId,
      later,
      now,
      (r) => heard.push(r),
      () => undefined,
    );
    return heard;
  }

  const waiting: string[] = [];
  afterEach(() => {
    for (const id of waiting.splice(0)) router.cancel(id);
  });

  it('decrypts and delivers a reply its waiter wants', async () => {
    const actionId = randomUUID();
    waiting.push(actionId);
    const heard = waitFor(actionId);
    await intake.accept(envelope(actionId));
    expect(heard).toEqual([responseReply({ ok: actionId })]);
  });

  it('parks a reply it cannot read when someone waits for it (a message that can never succeed)', async () => {
    const actionId = randomUUID();
    waiting.push(actionId);
    waitFor(actionId);
    const garbled = { ...cipher.encrypt(responseReply(), actionId), ct: randomBytes(48).toString('base64') };
    await expect(intake.accept(envelope(actionId, { body: garbled }))).rejects.toBeInstanceOf(PoisonMessageError);
  });

  it('drops a reply nobody waits for before reading it: a gone stream client costs no decrypt per chunk', async () => {
    const actionId = randomUUID();
    const garbled = { ...cipher.encrypt(responseReply(), actionId), ct: randomBytes(48).toString('base64') };
    // unreadable, and still no error: it was never decrypted
    await expect(intake.accept(envelope(actionId, { body: garbled }))).resolves.toBeUndefined();
    // a waiter that went (the client left) is nobody too
    const heard = waitFor(actionId);
    router.cancel(actionId);
    await intake.accept(envelope(actionId));
    expect(heard).toEqual([]);
  });

  it("ignores a reply addressed to another instance, even one this instance's router would want", async () => {
    const actionId = randomUUID();
    waiting.push(actionId);
    const heard = waitFor(actionId);
    await intake.accept(envelope(actionId, { replyTo: 'admission-2' }));
    expect(heard).toEqual([]);
  });
});
