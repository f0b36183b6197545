/**
 * The kube-apiservers' audit logs (hack/localenv/apiserver.ts): evidence of
 * what a cluster really received, and of the SubjectAccessReviews the
 * gateway asked the hub.
 */
import { readFileSync } from 'node:fs';
import { auditLogPath } from '../../hack/localenv/apiserver.ts';
import { environmentState } from './environment.ts';

export interface AuditEvent {
  auditID: string;
  stage: string;
  requestURI: string;
  verb: string;
  user: { username: string; groups?: string[] };
  impersonatedUser?: { username: string; groups?: string[] };
  objectRef?: {
    resource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
    apiVersion?: string;
    subresource?: string;
  };
  requestReceivedTimestamp: string;
  responseStatus?: { code?: number };
  requestObject?: Record<string, unknown>;
  responseObject?: Record<string, unknown>;
}

/** Every event logged so far by cluster `name` ("hub", "cluster1", ...). */
export function auditEvents(name: string): AuditEvent[] {
  const text = readFileSync(auditLogPath(environmentState().stateDir, name), 'utf8');
  const events: AuditEvent[] = [];
  for (const line of text.split('\n')) {
    if (line) events.push(JSON.parse(line) as AuditEvent);
  }
  return events;
}

export interface SubjectAccessReviewRecord {
  spec: {
    user: string;
    groups?: string[];
    resourceAttributes?: Record<string, string>;
    nonResourceAttributes?: { path: string; verb: string };
  };
  allowed: boolean;
}

/** The SubjectAccessReviews the hub answered, with their decision. */
export function subjectAccessReviews(): SubjectAccessReviewRecord[] {
  return auditEvents('hub')
    .filter((e) => e.objectRef?.resource === 'subjectaccessreviews' && e.verb === 'create' && e.requestObject)
    .map((e) => ({
      spec: (e.requestObject as { spec: SubjectAccessReviewRecord['spec'] }).spec,
      allowed: (e.responseObject as { status?: { allowed?: boolean } } | undefined)?.status?.allowed === true,
    }));
}
