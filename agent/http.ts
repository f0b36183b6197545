/**
 * /healthz, /readyz and /metrics over node:http. The manager serves its
 * endpoints with express; the agent does not: it runs on every managed
 * cluster, often on small edge nodes, and three fixed GET routes do not
 * earn a framework's memory.
 *
 * /metrics is not for everyone who can reach the pod: the kubelet probes the pod's address, so the
 * probes listen on --bind-address (all addresses), while /metrics is served on
 * --metrics-bind-address (127.0.0.1 by default: the pod itself and its sidecars, such as a
 * kube-rbac-proxy, and nothing off the pod). When both addresses are the same, one listener serves
 * everything.
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

/** Where /metrics is served instead, for the 404 the probes listener answers. */
export interface MetricsElsewhere {
  elsewhere: string;
}

export function createAgentServer(probes: Probes, metrics: MetricsSource | MetricsElsewhere): http.Server {
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
        if ('elsewhere' in metrics) {
          return reply(
            res,
            404,
            `not found: /metrics is served on ${metrics.elsewhere} (--metrics-bind-address)\n`,
          );
        }
        return renderMetrics(res, metrics);
      default:
        return reply(res, 404, 'not found: try /healthz, /readyz or /metrics\n');
    }
  });
}

/** The /metrics-only listener, on --metrics-bind-address. */
export function createMetricsServer(metrics: MetricsSource): http.Server {
  return http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return reply(res, 405, 'method not allowed: use GET\n', { allow: 'GET, HEAD' });
    }
    if (url !== '/metrics') return reply(res, 404, 'not found: try /metrics\n');
    return renderMetrics(res, metrics);
  });
}

function renderMetrics(res: http.ServerResponse, metrics: MetricsSource): void {
  reply(res, 200, metrics.render(), { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
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
