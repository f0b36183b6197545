/**
 * The errors authenticators and authorizers throw, as Kubernetes Status
 * objects so the server can write them to the client unchanged.
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';

/** Credentials were present but not valid: 401, other authenticators may still succeed. */
export function unauthorized(message: string): StatusError {
  return new StatusError(failureStatus(401, message));
}

/**
 * Credentials that must fail the whole request even if another
 * authenticator would accept something else on it. Used for identity
 * headers (X-Remote-User) that arrive without a verified front-proxy
 * certificate: serving such a request as any other identity would hide a
 * misconfiguration or a spoofing attempt.
 */
export class RejectedCredentialsError extends StatusError {
  constructor(message: string) {
    super(failureStatus(401, message));
    this.name = 'RejectedCredentialsError';
  }
}

/**
 * A TokenReview or SubjectAccessReview call that failed. Never a silent
 * deny: the caller gets 503 when the hub apiserver is unreachable,
 * overloaded or failing (retrying makes sense), and 500 when it refused
 * the review itself (for example the gateway lacks RBAC to create reviews).
 */
export function reviewFailure(what: string, err: unknown): StatusError {
  const detail = err instanceof Error ? err.message : String(err);
  const upstream = err instanceof StatusError ? err.code : 0;
  const transient = upstream === 0 || upstream === 429 || upstream >= 500;
  const code = transient ? 503 : 500;
  return new StatusError(failureStatus(code, `${what} failed: ${detail}`));
}
