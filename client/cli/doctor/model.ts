/**
 * What a doctor check is and what it says. A check is a pure verdict over what was read from the hub
 * (the reads are shared and run at once, reads.ts); the report keeps the order of `checks` in run.ts,
 * hub first, then each cluster from the addon down to a proxied request.
 */

export type CheckOutcome = 'pass' | 'fail' | 'skipped';

/** One line of the report (and one item of `-o json|yaml`). */
export interface CheckResult {
  /** Stable identifier, e.g. `apiservice-available`. */
  name: string;
  /** The managed cluster the check is about; absent for the hub's checks. */
  cluster?: string;
  result: CheckOutcome;
  message: string;
  /** The object to look at, as `kind namespace/name` (kubectl's way of naming one). */
  object?: string;
  /** The command (or commands, one per line) that fixes a failure. */
  fix?: string;
  durationMs: number;
}

/** What a check decides, before the runner adds its name, cluster and timing. */
export interface Verdict {
  result: CheckOutcome;
  message: string;
  object?: string;
  fix?: string;
  /** A skip that makes the checks depending on this one meaningless too (e.g. the addon is not enabled). */
  cascade?: boolean;
}

export const pass = (message: string, object?: string): Verdict => ({
  result: 'pass',
  message,
  ...(object ? { object } : {}),
});

export const fail = (message: string, object: string, fix: string): Verdict => ({
  result: 'fail',
  message,
  object,
  fix,
});

export const skipped = (message: string, object?: string): Verdict => ({
  result: 'skipped',
  message,
  ...(object ? { object } : {}),
});

/** Where the addon lives on the hub: read from the hub's objects where they say it, else the chart's defaults. */
export interface AddonLayout {
  addonName: string;
  apiServiceName: string;
  /** The gateway's Service (the APIService's backend) and, by the manager's convention, its Deployment. */
  gatewayNamespace: string;
  gatewayName: string;
  /** The chart's release namespace: the manager, its leader Lease, its webhook Service. */
  managerNamespace: string;
  /** The manager's leader-election Lease (manager/addon/main.ts: `<addon>-addon-manager`). */
  managerLeaseName: string;
  /** The manager pods' selector (the chart's managerSelector). */
  managerSelector: string;
  /** The LeaseNotFound webhook (manager/addon/availability/lease-not-found-webhook.ts). */
  webhookName: string;
  /** The agents' namespace on managed clusters unless an addon says otherwise (chart addon.agentInstallNamespace). */
  agentNamespace: string;
  agentDeployment: string;
}

export const defaultLayout: AddonLayout = {
  addonName: 'cluster-gateway',
  apiServiceName: 'v1alpha1.cluster.core.oam.dev',
  gatewayNamespace: 'open-cluster-management-addon',
  gatewayName: 'cluster-gateway',
  managerNamespace: 'open-cluster-management-addon',
  managerLeaseName: 'cluster-gateway-addon-manager',
  managerSelector: 'app.kubernetes.io/component=addon-manager',
  webhookName: 'cluster-gateway-addon-available',
  agentNamespace: 'open-cluster-management-agent-addon',
  agentDeployment: 'cluster-gateway-agent',
};
