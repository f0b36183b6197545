/**
 * Where a workload's pods go and what they carry, as a platform team sets it for every workload of the
 * chart (manager, gateway, agent): affinity, priorityClassName, and extra pod annotations and labels.
 * The manager takes the gateway's and the agent's as flags (--gateway-* and --agent-*, JSON like the
 * other structured flags: the chart renders them with `toJson`), parsed and checked here once for both.
 *
 * The workload's own labels and annotations win over extra ones of the same key: its selector, the
 * labels its controllers select on and its config hash are not the user's to change (a label of the
 * selector changed on the template would orphan the running pods).
 */
import { OptionsError } from '../../../shared/cli-flags.ts';

export interface PodSettings {
  /** A pod affinity ({nodeAffinity, podAffinity, podAntiAffinity}); {}: none of the user's. */
  affinity: Record<string, unknown>;
  /** '': none (the cluster's default priority). */
  priorityClassName: string;
  podAnnotations: Record<string, string>;
  podLabels: Record<string, string>;
}

export const noPodSettings: PodSettings = {
  affinity: {},
  priorityClassName: '',
  podAnnotations: {},
  podLabels: {},
};

/** The four flags of a workload, e.g. podSettingsFlags('gateway', 'the gateway pods'). */
export function podSettingsFlags<P extends string>(prefix: P, pods: string) {
  return {
    [`${prefix}-affinity`]: {
      type: 'string',
      default: '{}',
      help: `JSON: ${pods}' affinity (nodeAffinity, podAffinity, podAntiAffinity)`,
    },
    [`${prefix}-priority-class-name`]: {
      type: 'string',
      default: '',
      help: `${pods}' priorityClassName (empty: none)`,
    },
    [`${prefix}-pod-annotations`]: {
      type: 'string',
      default: '{}',
      help: `JSON object: more annotations of ${pods}`,
    },
    [`${prefix}-pod-labels`]: {
      type: 'string',
      default: '{}',
      help: `JSON object: more labels of ${pods} (their own labels win)`,
    },
  } as Record<
    `${P}-${'affinity' | 'priority-class-name' | 'pod-annotations' | 'pod-labels'}`,
    {
      type: 'string';
      default: string;
      help: string;
    }
  >;
}

const affinityKinds = new Set(['nodeAffinity', 'podAffinity', 'podAntiAffinity']);
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A label or annotation key: an optional DNS subdomain prefix and a name of at most 63 characters. */
const keyName = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const labelValue = /^$|^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** `values` as parseFlags returns them; the flags of podSettingsFlags(prefix). */
export function parsePodSettings(prefix: string, values: Record<string, unknown>): PodSettings {
  const str = (name: string, fallback: string) => String(values[`${prefix}-${name}`] ?? fallback).trim();
  const affinity = jsonObject(`${prefix}-affinity`, str('affinity', '{}'));
  for (const key of Object.keys(affinity)) {
    if (!affinityKinds.has(key)) {
      throw new OptionsError(
        `--${prefix}-affinity: "${key}" is not nodeAffinity, podAffinity or podAntiAffinity`,
      );
    }
  }
  const priorityClassName = str('priority-class-name', '');
  if (priorityClassName && (priorityClassName.length > 253 || !dnsSubdomain.test(priorityClassName))) {
    throw new OptionsError(
      `--${prefix}-priority-class-name: "${priorityClassName}" is not a PriorityClass name`,
    );
  }
  const podAnnotations = stringMap(`${prefix}-pod-annotations`, str('pod-annotations', '{}'));
  const podLabels = stringMap(`${prefix}-pod-labels`, str('pod-labels', '{}'));
  for (const [k, v] of Object.entries(podLabels)) {
    if (v.length > 63 || !labelValue.test(v)) {
      throw new OptionsError(`--${prefix}-pod-labels: the value of "${k}" ("${v}") is not a label value`);
    }
  }
  return { affinity, priorityClassName, podAnnotations, podLabels };
}

/**
 * The pod template's metadata and spec fields for `settings` around the workload's own: its labels and
 * annotations over the extra ones, its affinity terms kept unless the user gives one of the same kind.
 */
export function applyPodSettings(
  settings: PodSettings,
  own: { labels: Record<string, string>; annotations?: Record<string, string>; affinity?: object },
): {
  metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  spec: { affinity?: object; priorityClassName?: string };
} {
  const annotations = { ...settings.podAnnotations, ...own.annotations };
  const affinity = { ...own.affinity, ...settings.affinity };
  return {
    metadata: {
      labels: { ...settings.podLabels, ...own.labels },
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    spec: {
      ...(Object.keys(affinity).length > 0 ? { affinity } : {}),
      ...(settings.priorityClassName ? { priorityClassName: settings.priorityClassName } : {}),
    },
  };
}

function jsonObject(flag: string, text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new OptionsError(`--${flag}: not JSON (${(err as Error).message})`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new OptionsError(`--${flag}: must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

function stringMap(flag: string, text: string): Record<string, string> {
  const value = jsonObject(flag, text);
  for (const [k, v] of Object.entries(value)) {
    const [prefix, name, extra] = k.includes('/') ? k.split('/') : [undefined, k];
    if (
      extra !== undefined ||
      !name ||
      name.length > 63 ||
      !keyName.test(name) ||
      (prefix !== undefined && (prefix.length > 253 || !dnsSubdomain.test(prefix)))
    ) {
      throw new OptionsError(`--${flag}: "${k}" is not a label or annotation key`);
    }
    if (typeof v !== 'string') throw new OptionsError(`--${flag}: the value of "${k}" must be a string`);
  }
  return value as Record<string, string>;
}
