/** The authenticated caller, as Kubernetes' user.Info. */
export interface UserInfo {
  name: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}
