/** metav1.Status: the error shape every Kubernetes API server returns. */
export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message: string;
  reason: string;
  code: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: Array<{ reason?: string; message?: string; field?: string }>;
    retryAfterSeconds?: number;
  };
}

const reasons: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  502: 'BadGateway',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export function failureStatus(
  code: number,
  message: string,
  details?: KubeStatus['details'],
  reason?: string,
): KubeStatus {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: reason ?? reasons[code] ?? 'Unknown',
    code,
    ...(details ? { details } : {}),
  };
}

/** An API error carrying the server's Status, so callers can branch on `code` and `reason`. */
export class StatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly status: KubeStatus;

  constructor(status: KubeStatus, context?: string) {
    super(context ? `${context}: ${status.message}` : status.message);
    this.name = 'StatusError';
    this.status = status;
    this.code = status.code;
    this.reason = status.reason;
  }

  static fromResponse(code: number, body: string, context?: string): StatusError {
    try {
      const parsed = JSON.parse(body) as Partial<KubeStatus>;
      if (parsed.kind === 'Status') {
        return new StatusError(
          { ...failureStatus(code, parsed.message ?? ''), ...parsed } as KubeStatus,
          context,
        );
      }
    } catch {
      // not JSON: fall through and keep the raw text
    }
    return new StatusError(failureStatus(code, body.trim().slice(0, 500) || `HTTP ${code}`), context);
  }
}
