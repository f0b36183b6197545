/**
 * The gateway controller's own series, on the manager's registry: whether
 * the APIService points at the gateway, and when the serving certificate
 * and the CA expire (alert well before, should renewal ever stop).
 */
import { Gauge, type Registry } from 'prom-client';

export class GatewayMetrics {
  readonly #registered: Gauge;
  readonly #expiry: Gauge<'certificate'>;

  constructor(registry: Registry) {
    this.#registered = new Gauge({
      name: 'cluster_gateway_addon_gateway_apiservice_registered',
      help: '1 while the APIService points at the gateway the manager deploys',
      registers: [registry],
    });
    this.#expiry = new Gauge({
      name: 'cluster_gateway_addon_gateway_certificate_expiry_timestamp_seconds',
      help: "Expiry of the gateway's serving certificate and of its CA (Unix seconds)",
      labelNames: ['certificate'],
      registers: [registry],
    });
  }

  setRegistered(registered: boolean): void {
    this.#registered.set(registered ? 1 : 0);
  }

  setExpiry(certificate: 'serving' | 'ca', expiresAt: number): void {
    this.#expiry.set({ certificate }, Math.round(expiresAt / 1000));
  }
}
