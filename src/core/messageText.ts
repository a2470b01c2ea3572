// The text of a message document (quayside-message:/<namespace>/<queue>/<id>.json). It is shown as
// JSON, so it is always valid JSON: a message that is gone (acked, discarded) reads as an error object,
// not a comment that would put the tab and the Problems view in error. No VS Code here.
import type { Transport } from '../../emulator/clients/transport';
import type { MessageAddress } from './messageRefresh';

export async function messageText(t: Pick<Transport, 'request'>, address: MessageAddress | undefined): Promise<string> {
  if (!address) return errorText('invalid_argument', 'not a Quayside message address');
  try {
    return JSON.stringify(await t.request('message.get', address), null, 2) + '\n';
  } catch (e) {
    const err = e as { code?: unknown; message?: unknown };
    return errorText(typeof err.code === 'string' ? err.code : 'internal', typeof err.message === 'string' ? err.message : String(e));
  }
}

function errorText(error: string, message: string): string {
  return JSON.stringify({ error, message }, null, 2) + '\n';
}
