/**
 * Is the gateway serving? A pure reading of its Deployment's status, used to
 * decide whether the APIService may point at it: an APIService whose
 * service answers nothing is not Available, and an unavailable APIService
 * breaks discovery (kubectl api-resources, namespace deletion, garbage
 * collection) for every hub user. One available replica is enough: it
 * answers every request the aggregator sends.
 */

export interface DeploymentStatusView {
  metadata?: { generation?: number };
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    availableReplicas?: number;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

export type GatewayAvailability =
  | { available: true; message: string }
  | { available: false; reason: 'GatewayDeploymentMissing' | 'GatewayUnavailable'; message: string };

export function gatewayAvailability(
  deployment: DeploymentStatusView | undefined,
  name: string,
): GatewayAvailability {
  if (!deployment) {
    return {
      available: false,
      reason: 'GatewayDeploymentMissing',
      message: `the gateway Deployment ${name} does not exist yet`,
    };
  }
  const wanted = deployment.spec?.replicas ?? 1;
  const available = deployment.status?.availableReplicas ?? 0;
  if (available >= 1) {
    return { available: true, message: `${available}/${wanted} gateway replicas available` };
  }
  const condition = deployment.status?.conditions?.find((c) => c.type === 'Available');
  const why = condition?.message ? ` (${condition.message})` : '';
  return {
    available: false,
    reason: 'GatewayUnavailable',
    message: `0/${wanted} gateway replicas available${why}: the APIService is registered once one serves, so hub discovery never points at nothing`,
  };
}
