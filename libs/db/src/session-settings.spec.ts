import pg from 'pg';
import { Database } from './database';

/**
 * `Database` adds the server's idle-in-transaction bound to the connection string's start-up
 * `options`. Rewriting the URL must change nothing else a URL can carry: escaped user names and
 * passwords, a socket directory as host, other parameters, options the operator already set. No
 * server is needed: the pool keeps the rewritten string until its first connection.
 */
/** What `pg` makes of a connection string (`pg.Client`'s own parse, no connection). */
function parse(connectionString: string): Record<string, unknown> {
  const { user, password, host, port, database, options, ssl, application_name } = (
    new pg.Client({ connectionString }) as unknown as { connectionParameters: Record<string, unknown> }
  ).connectionParameters;
  return { user, password, host, port, database, options, ssl, application_name };
}

describe('the connection string with the idle-in-transaction bound', () => {
  const rewritten = (url: string, idleInTransactionMs?: number): string => {
    const db = new Database(url, { idleInTransactionMs });
    const connectionString = (db.pool as unknown as { options: { connectionString: string } }).options.connectionString;
    void db.close();
    return connectionString;
  };

  it.each([
    [
      'escaped user, password and database, ssl and other parameters',
      'postgresql://us%40er:p%40ss%2Fw%3Ard%20x@db.example:6543/gate%20way?sslmode=verify-full&application_name=a%20b',
    ],
    ['a socket directory as host', 'postgresql:///gateway?host=/var/run/postgresql'],
    ['characters a password may hold unescaped', 'postgres://u:pa$$w0rd!*@127.0.0.1/g'],
  ])('%s: every other field as before, the bound in options', (_, url) => {
    const { options, ...rest } = parse(rewritten(url, 15_000));
    const { options: none, ...before } = parse(url);
    expect(none).toBeUndefined();
    expect(rest).toEqual(before);
    expect(options).toBe('-c idle_in_transaction_session_timeout=15000');
  });

  it("after the URL's own options", () => {
    const url = `postgresql://u@h/d?options=${encodeURIComponent('-c statement_timeout=5000 -c search_path=gw')}`;
    expect(parse(rewritten(url, 20_000)).options).toBe(
      '-c statement_timeout=5000 -c search_path=gw -c idle_in_transaction_session_timeout=20000',
    );
  });

  it('0: the URL as given', () => {
    const url = 'postgresql://u:p@h:5432/d?application_name=x';
    expect(rewritten(url, 0)).toBe(url);
  });
});
