/**
 * Which RBAC grants are broad: a rule that reaches a sensitive resource or verb for every object of its
 * kind (no resourceNames), or any wildcard. charts/permissions.test.ts applies it to the chart's roles and
 * to the gateway's (manager/addon/gateway-deploy/rbac.ts) and requires each broad grant to be on the
 * reviewed list of docs/install.md ("Permissions: the broad grants and why"), with its reason.
 */

export interface Rule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
  nonResourceURLs?: string[];
}

/** One broad grant: who, where (hub-wide or a namespace's role), on what (resource.group), which verb. */
export interface Grant {
  subject: string;
  scope: string;
  resource: string;
  verb: string;
}

const writeVerbs = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
/** Verbs that are privileged on any resource: RBAC escalation, impersonation, CSR approval. */
const privilegedVerbs = new Set(['escalate', 'bind', 'impersonate', 'approve']);

/** `resource.group` as kubectl names it (`secrets` for the core group). */
export function resourceName(group: string, resource: string): string {
  return group ? `${resource}.${group}` : resource;
}

/** Is `verb` on `group/resource` sensitive, for every object of its kind? */
export function sensitive(group: string, resource: string, verb: string): boolean {
  if (privilegedVerbs.has(verb)) return true;
  const base = resource.split('/')[0] ?? resource;
  switch (`${base}.${group}`) {
    // Credentials, and the Leases that elect leaders and route tunnels: every verb.
    case 'secrets.':
    case 'leases.coordination.k8s.io':
    // Admission and the aggregation layer see or answer every request: every verb.
    case 'mutatingwebhookconfigurations.admissionregistration.k8s.io':
    case 'validatingwebhookconfigurations.admissionregistration.k8s.io':
    case 'validatingadmissionpolicies.admissionregistration.k8s.io':
    case 'validatingadmissionpolicybindings.admissionregistration.k8s.io':
    case 'mutatingadmissionpolicies.admissionregistration.k8s.io':
    case 'mutatingadmissionpolicybindings.admissionregistration.k8s.io':
    case 'apiservices.apiregistration.k8s.io':
    // Certificate requests: approval makes identities.
    case 'certificatesigningrequests.certificates.k8s.io':
      return true;
    // Who may do what, where clusters are reached, what runs on them, what the addon reports: writes.
    case 'roles.rbac.authorization.k8s.io':
    case 'rolebindings.rbac.authorization.k8s.io':
    case 'clusterroles.rbac.authorization.k8s.io':
    case 'clusterrolebindings.rbac.authorization.k8s.io':
    case 'managedclusters.cluster.open-cluster-management.io':
    case 'manifestworks.work.open-cluster-management.io':
    case 'managedclusteraddons.addon.open-cluster-management.io':
    case 'clustermanagementaddons.addon.open-cluster-management.io':
      return writeVerbs.has(verb);
    default:
      return false;
  }
}

/** The broad grants of `rules`, held by `subject` in `scope`. */
export function broadGrants(subject: string, scope: string, rules: Rule[]): Grant[] {
  const found: Grant[] = [];
  for (const rule of rules) {
    const wildcard = [rule.apiGroups, rule.resources, rule.verbs, rule.nonResourceURLs].some((l) =>
      l?.includes('*'),
    );
    for (const group of rule.apiGroups ?? []) {
      for (const resource of rule.resources ?? []) {
        for (const verb of rule.verbs) {
          const broad = wildcard || (!rule.resourceNames?.length && sensitive(group, resource, verb));
          if (broad) found.push({ subject, scope, resource: resourceName(group, resource), verb });
        }
      }
    }
    if (rule.nonResourceURLs?.includes('*')) {
      for (const verb of rule.verbs) found.push({ subject, scope, resource: 'nonResourceURLs *', verb });
    }
  }
  return found;
}

/** One row of the reviewed list: subject, scope, resources, their verbs, and why. */
export interface ReviewedGrant {
  subject: string;
  scope: string;
  resources: string[];
  verbs: string[];
  reason: string;
  line: number;
}

export const reviewedHeading = '## Permissions: the broad grants and why';

/**
 * The reviewed list: the table under `reviewedHeading` in docs/install.md, one row per grant,
 * `| who | where | resources | verbs | why |` (backticks allowed; several resources or verbs separated by
 * commas).
 */
export function parseReviewed(markdown: string): ReviewedGrant[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => l.trim() === reviewedHeading);
  if (start < 0) throw new Error(`docs/install.md has no "${reviewedHeading}" section`);
  const rows: ReviewedGrant[] = [];
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line.startsWith('## ')) break;
    if (!line.startsWith('|')) continue;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim().replaceAll('`', ''));
    if (cells.length !== 5) throw new Error(`docs/install.md:${i + 1}: a row needs 5 cells: ${line}`);
    const [subject = '', scope = '', resources = '', verbs = '', reason = ''] = cells;
    if (subject === 'who' || /^-+$/.test(subject)) continue;
    rows.push({
      subject,
      scope,
      resources: resources.split(/[\s,]+/).filter(Boolean),
      verbs: verbs.split(/[\s,]+/).filter(Boolean),
      reason,
      line: i + 1,
    });
  }
  return rows;
}

/** Broad grants no reviewed row covers, and reviewed verbs no broad grant matches any more (stale). */
export function compareWithReviewed(
  grants: Grant[],
  reviewed: ReviewedGrant[],
): { unreviewed: Grant[]; stale: string[] } {
  const key = (g: Omit<Grant, 'verb'> & { verb: string }) =>
    `${g.subject} | ${g.scope} | ${g.resource} | ${g.verb}`;
  const reviewedKeys = new Set(
    reviewed.flatMap((r) =>
      r.resources.flatMap((resource) => r.verbs.map((verb) => key({ ...r, resource, verb }))),
    ),
  );
  const grantKeys = new Set(grants.map(key));
  return {
    unreviewed: grants.filter((g) => !reviewedKeys.has(key(g))),
    stale: [...reviewedKeys].filter((k) => !grantKeys.has(k)),
  };
}
