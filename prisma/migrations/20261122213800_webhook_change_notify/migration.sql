-- Inbound webhooks: every change of the webhooks table (through the API, another feature, or SQL)
-- is announced on the channel svc_webhooks_changed when its transaction commits, so each API
-- process drops its in-memory cache of webhook definitions at once (src/webhooks/webhook-cache.ts).
-- Hand-written: Prisma's schema does not describe triggers.
CREATE FUNCTION svc_notify_webhooks_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('svc_webhooks_changed', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER webhooks_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "webhooks"
FOR EACH STATEMENT EXECUTE FUNCTION svc_notify_webhooks_changed();
