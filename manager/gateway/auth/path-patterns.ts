/**
 * Path lists in the style of Kubernetes' --authorization-always-allow-paths:
 * an entry is an exact path, or a prefix when it ends in "*".
 */
export function matchesPath(patterns: readonly string[], path: string): boolean {
  return patterns.some((pattern) =>
    pattern.endsWith('*') ? path.startsWith(pattern.slice(0, -1)) : path === pattern,
  );
}
