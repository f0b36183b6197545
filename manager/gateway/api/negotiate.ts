/**
 * Which representation of clustergateways a request wants: the object
 * itself, a Table (kubectl get), or PartialObjectMetadata (metadata-only
 * informers such as the garbage collector's). Anything else is a 406.
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { acceptsJson, parseAccept } from './accept.ts';
import type { TableVersion } from './table.ts';

export type Representation =
  | { as: 'object' }
  | { as: 'Table'; version: TableVersion }
  | { as: 'PartialObjectMetadata'; version: TableVersion };

/** `list` selects PartialObjectMetadataList instead of PartialObjectMetadata (watches use the latter). */
export function negotiateRepresentation(
  accept: string | undefined,
  shape: 'object' | 'list',
): Representation {
  for (const range of parseAccept(accept)) {
    if (!acceptsJson(range)) continue;
    const { as, g, v } = range.params;
    if (as === undefined) return { as: 'object' };
    if (g !== 'meta.k8s.io' || (v !== 'v1' && v !== 'v1beta1')) continue;
    if (as === 'Table') return { as: 'Table', version: v };
    const partial = shape === 'list' ? 'PartialObjectMetadataList' : 'PartialObjectMetadata';
    if (as === partial) return { as: 'PartialObjectMetadata', version: v };
  }
  throw new StatusError(
    failureStatus(
      406,
      'only the following media types are accepted: application/json, application/json;as=Table;g=meta.k8s.io;v=v1, ' +
        'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
    ),
  );
}
