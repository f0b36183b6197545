/**
 * /healthz, /readyz and /metrics over node:http. The manager serves its
 * endpoints with express; the agent does not: it runs on every managed
 * cluster, often on small edge nodes, and three fixed GET routes do not
 * earn a framework's memory.
 */
import http from 'node:http';
import type { Health } from './renewer.ts';

export interface Probes {
  /** The renewal loop is alive (not stuck). */
  live(): { ok: boolean; message: string };
  ready(): Health;
}

/** Anything that renders Prometheus text: AgentMetrics, plus the tunnel's when it runs. */
export interface MetricsSource {
  render(): string;
}

export function createAgentServer(probes: Probes, metrics: MetricsSource): http.Server {
  return http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return reply(res, 405, 'method not allowed: use GET\n', { allow: 'GET, HEAD' });
    }
    switch (url) {
      case '/healthz':
      case '/livez': {
        const live = probes.live();
        return reply(res, live.ok ? 200 : 503, live.ok ? 'ok\n' : `${live.message}\n`);
      }
      case '/readyz': {
        const h = probes.ready();
        return reply(
          res,
          h.healthy ? 200 : 503,
          `${h.healthy ? 'ok' : 'not ready'}: ${h.reason}: ${h.message}\n`,
        );
      }
      case '/metrics':
        return reply(res, 200, metrics.render(), {
          'content-type': 'text/plain; version=0.0.4; charset=utf-8',
        });
      default:
        return reply(res, 404, 'not found: try /healthz, /readyz or /metrics\n');
    }
  });
}

function reply(
  res: http.ServerResponse,
  code: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
