/**
 * A real ExternalIdentityExchanger service for e2e tests: HTTPS with its own
 * CA (the rule's caBundle), answering IdentityExchangeReviews from a table
 * of hub user -> identity on the cluster, recording every review it gets,
 * and able to stop (to prove the gateway answers 503, never a fallback).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createCertificateAuthority } from '../../shared/pki.ts';

export interface ExchangeReview {
  spec: {
    rule: string;
    cluster: string;
    user: { username: string; uid?: string; groups: string[]; extra: Record<string, string[]> };
  };
}

/** What the service answers for a hub user: an identity, an HTTP error code, or a denial. */
export type ExchangeAnswer =
  | { username: string; groups?: string[] }
  | { httpError: number }
  | { denied: string };

export interface IdentityExchangerService {
  url: string;
  /** PEM CA that signed the service's certificate. */
  caBundle: string;
  /** PEM private key of the serving certificate, to prove it never shows up in logs. */
  servingKey: string;
  reviews: ExchangeReview[];
  stop(): Promise<void>;
}

export async function startIdentityExchanger(
  answers: Record<string, ExchangeAnswer>,
): Promise<IdentityExchangerService> {
  const ca = await createCertificateAuthority('e2e-identity-exchanger-ca');
  const serving = await ca.issue({ commonName: 'localhost', ipAddresses: ['127.0.0.1'], usage: 'server' });
  const reviews: ExchangeReview[] = [];
  const server = https.createServer(serving, (req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => {
      const review = JSON.parse(text) as ExchangeReview;
      reviews.push(review);
      const answer = answers[review.spec.user.username];
      const reply = (code: number, body: unknown) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (!answer) reply(200, { status: { denied: true, reason: 'unknown user' } });
      else if ('httpError' in answer) reply(answer.httpError, { message: 'exchanger failure' });
      else if ('denied' in answer) reply(200, { status: { denied: true, reason: answer.denied } });
      else reply(200, { status: { user: { username: answer.username, groups: answer.groups ?? [] } } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let stopped = false;
  return {
    url: `https://127.0.0.1:${port}/exchange`,
    caBundle: ca.cert,
    servingKey: serving.key,
    reviews,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
