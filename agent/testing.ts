/** A stand-in for KubeClient in unit tests: records requests, answers from a handler. */
import type { KubeClient, RequestOptions } from '../shared/kube/client.ts';
import { failureStatus, StatusError } from '../shared/kube/status.ts';

export interface Call {
  method: string;
  path: string;
  body?: unknown;
}

export type Handler = (call: Call) => unknown;

export function fakeClient(handler: Handler): { client: KubeClient; calls: Call[] } {
  const calls: Call[] = [];
  const client = {
    async request(method: string, path: string, options: RequestOptions = {}) {
      const call: Call = { method, path, ...(options.body !== undefined ? { body: options.body } : {}) };
      calls.push(call);
      return handler(call);
    },
  } as unknown as KubeClient;
  return { client, calls };
}

export function statusError(code: number, message = `HTTP ${code}`): StatusError {
  return new StatusError(failureStatus(code, message));
}
