/**
 * The manager's HTTP endpoints, served with express: /healthz, /readyz and
 * /metrics over plain HTTP (kubelet probes and Prometheus scrapes), and the
 * admission webhooks over HTTPS (the API server calls webhooks over TLS
 * only). Unlike the gateway's proxy path (manager/gateway/proxy, raw
 * node:https for throughput), nothing here is a hot path: a probe every few
 * seconds, a scrape, a webhook call per addon status write. Express buys
 * routing, JSON bodies and error handling for free at no cost that matters.
 */
import { readFileSync, watch } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import express, { type Router } from 'express';
import type { Logger } from 'pino';
import { failureStatus } from '../../shared/kube/status.ts';
import type { KeyPair } from '../../shared/pki.ts';
import type { AddonMetrics } from './core/metrics.ts';

export interface HttpServersOptions {
  bindAddress: string;
  /** 0: any free port. */
  httpPort: number;
  /** 0: no webhook listener. */
  webhookPort: number;
  /**
   * PEM CA bundle (--webhook-client-ca): the webhook listener asks for a client certificate and
   * refuses, with 401, every caller whose certificate this CA did not sign. Undefined: no client
   * authentication (handlers see `socket.authorized` false and must answer accordingly).
   */
  webhookClientCa?: string;
  /** The webhook serving certificate: files (reloaded when they change) or PEM held by the manager. */
  tls?: { certFile: string; keyFile: string } | KeyPair;
  /** /readyz answers 200 only when this is true (informers synced). */
  ready: () => boolean;
  metrics: AddonMetrics;
  /** Mounted at / on the HTTPS listener; admission webhook handlers live here. */
  webhookRouter?: Router;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
}

export interface HttpServers {
  httpPort: number;
  /** 0 when the webhook listener is off. */
  webhookPort: number;
  /** Serves `pair` from the next TLS handshake on (a renewed certificate, without a restart). */
  setServingCertificate(pair: KeyPair): void;
  close(): Promise<void>;
}

/** The probes and metrics app (exported for tests). */
export function probesApp(options: Pick<HttpServersOptions, 'ready' | 'metrics' | 'log'>): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  app.get('/readyz', (_req, res) => {
    if (options.ready()) res.type('text/plain').send('ok');
    else res.status(503).type('text/plain').send('informers not synced yet');
  });
  app.get('/metrics', async (_req, res, next) => {
    try {
      const { contentType, body } = await options.metrics.text();
      res.type(contentType).send(body);
    } catch (err) {
      next(err);
    }
  });
  app.use(notFound);
  app.use(errorHandler(options.log));
  return app;
}

/** The HTTPS app: JSON bodies (AdmissionReview), the webhook router, Status errors. */
export function webhookApp(
  options: Pick<HttpServersOptions, 'webhookRouter' | 'log' | 'webhookClientCa'>,
): express.Express {
  const app = express();
  app.disable('x-powered-by');
  if (options.webhookClientCa) {
    // Before the body is read: an unauthenticated caller gets nothing but the refusal. /healthz
    // stays open (it says only "ok").
    app.use((req, res, next) => {
      if (req.path === '/healthz' || (req.socket as TLSSocket).authorized) return next();
      const reason = (req.socket as TLSSocket).authorizationError;
      res
        .status(401)
        .json(
          failureStatus(
            401,
            `the webhook answers only the hub apiserver: present a client certificate signed by the --webhook-client-ca CA${reason ? ` (${reason})` : ''}`,
          ),
        );
    });
  }
  // An AdmissionReview carries one object: a few MB at most (etcd's own limit is 1.5 MB).
  app.use(express.json({ limit: '3mb', type: ['application/json', 'application/*+json'] }));
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  if (options.webhookRouter) app.use(options.webhookRouter);
  app.use(notFound);
  app.use(errorHandler(options.log));
  return app;
}

export async function startHttpServers(options: HttpServersOptions): Promise<HttpServers> {
  const plain = http.createServer(probesApp(options));
  const httpPort = await listen(plain, options.httpPort, options.bindAddress);
  let secure: https.Server | undefined;
  let webhookPort = 0;
  let stopWatching: (() => void) | undefined;
  try {
    if (options.webhookPort !== 0) {
      const tls = options.tls;
      if (!tls) throw new Error('the webhook listener needs a serving certificate');
      const files = 'certFile' in tls ? tls : undefined;
      // The client CA travels with every secure context: a reloaded certificate keeps it.
      const clientCa = options.webhookClientCa ? { ca: options.webhookClientCa } : {};
      const loadPair = () => ({
        ...(files
          ? { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) }
          : (tls as KeyPair)),
        ...clientCa,
      });
      secure = https.createServer(
        {
          ...loadPair(),
          // Ask, and verify in the app (a 401 Status with the reason rather than a TLS alert).
          ...(options.webhookClientCa ? { requestCert: true, rejectUnauthorized: false } : {}),
        },
        webhookApp(options),
      );
      if (files) {
        // A rotated certificate (a renewed Secret mounted as files) is picked up without a restart.
        const watcher = watch(files.certFile, () => {
          try {
            secure?.setSecureContext(loadPair());
            options.log.info({}, 'webhook serving certificate reloaded');
          } catch (err) {
            options.log.warn(
              { err: (err as Error).message },
              'cannot reload the webhook serving certificate',
            );
          }
        });
        watcher.unref();
        stopWatching = () => watcher.close();
      }
      webhookPort = await listen(secure, options.webhookPort, options.bindAddress);
    }
  } catch (err) {
    // A listener that failed must not leave the other one holding the process open.
    stopWatching?.();
    await close(plain);
    throw err;
  }
  return {
    httpPort,
    webhookPort,
    setServingCertificate(pair) {
      secure?.setSecureContext({
        ...pair,
        ...(options.webhookClientCa ? { ca: options.webhookClientCa } : {}),
      });
    },
    async close() {
      stopWatching?.();
      await Promise.all([close(plain), secure ? close(secure) : Promise.resolve()]);
    },
  };
}

function notFound(req: express.Request, res: express.Response): void {
  res.status(404).json(failureStatus(404, `no handler for ${req.method} ${req.path}`));
}

function errorHandler(log: Pick<Logger, 'error'>) {
  return (err: unknown, req: express.Request, res: express.Response, _next: express.NextFunction): void => {
    const status = (err as { status?: number; statusCode?: number }).status ?? 500;
    const code = status >= 400 && status < 600 ? status : 500;
    if (code >= 500) log.error({ err: (err as Error).message, path: req.path }, 'request failed');
    if (res.headersSent) {
      res.end();
      return;
    }
    const message =
      code === 400
        ? `malformed request body: ${(err as Error).message}`
        : code === 413
          ? 'request body too large'
          : (err as Error).message;
    res.status(code).json(failureStatus(code, message));
  };
}

function listen(server: http.Server | https.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function close(server: http.Server | https.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
