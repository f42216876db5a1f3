// What an Odoo host may hold of its PostgreSQL server's connections at worst, and the refusal when
// every host of the server cannot fit (src/odoo/odoo-connections.ts).
import { describe, expect, it } from 'vitest';
import { odooConfig } from '../../src/odoo/odoo-config.js';
import { dbMaxconn, hostConnections, SVC_CONNECTIONS, sizingRefusal } from '../../src/odoo/odoo-connections.js';
import { odooLayout } from '../../src/odoo/odoo-layout.js';

describe('an Odoo host’s connections', () => {
  it('prefork: 4 per worker, cron worker and update, 8 for the gevent process', () => {
    expect(dbMaxconn({ workers: 2, maxCronThreads: 1 })).toEqual({ db_maxconn: 4, db_maxconn_gevent: 8 });
    expect(hostConnections({ workers: 2, maxCronThreads: 0 }, 1)).toMatchObject({ serving: 16, perUpdate: 4, total: 20 });
    expect(hostConnections({ workers: 5, maxCronThreads: 1 }, 2)).toMatchObject({ serving: 32, total: 40 });
  });

  it('threaded: one process, 16 and 3 per cron thread, which an update process reads too', () => {
    expect(dbMaxconn({ workers: 0, maxCronThreads: 2 })).toEqual({ db_maxconn: 22, db_maxconn_gevent: null });
    expect(hostConnections({ workers: 0, maxCronThreads: 0 }, 1)).toMatchObject({ serving: 16, perUpdate: 16, total: 32 });
  });

  it('are written in the configuration', () => {
    const base = {
      layout: odooLayout('/opt/odoo', 8069),
      source: '/opt/odoo/versions/18.0',
      series: 18,
      addonsDirs: [],
      httpPort: 8069,
      db: { host: '10.0.0.5', port: 5432, user: 'odoo_abc', password: 'pw' },
      adminPasswdHash: 'x',
      dbfilter: '^%d$',
      maxCronThreads: 1,
      serverWideModules: ['base', 'web'],
    };
    const prefork = odooConfig({ ...base, sizing: { workers: 3, limit_memory_soft: 1, limit_memory_hard: 2 } }).split('\n');
    expect(prefork).toEqual(expect.arrayContaining(['db_maxconn = 4', 'db_maxconn_gevent = 8']));
    const threaded = odooConfig({ ...base, sizing: { workers: 0, limit_memory_soft: 1, limit_memory_hard: 2 } }).split('\n');
    expect(threaded).toContain('db_maxconn = 19');
    expect(threaded.some((l) => l.startsWith('db_maxconn_gevent'))).toBe(false);
  });
});

describe('every host of a PostgreSQL server', () => {
  const room = { max: 100, reserved: 3, forOdoo: 100 - 3 - SVC_CONNECTIONS };

  it('fit: no refusal', () => {
    expect(sizingRefusal('127.0.0.1:5432', room, { id: 1, workers: 2, maxCronThreads: 0 }, [], 1)).toBeNull();
    const others = [
      { id: 2, workers: 5, maxCronThreads: 1 },
      { id: 3, workers: 0, maxCronThreads: 0 },
    ];
    // 20 + 36 + 32 = 88 > 77
    expect(sizingRefusal('127.0.0.1:5432', room, { id: 1, workers: 2, maxCronThreads: 0 }, others.slice(0, 1), 1)).toBeNull();
    expect(sizingRefusal('127.0.0.1:5432', room, { id: 1, workers: 2, maxCronThreads: 0 }, others, 1)).not.toBeNull();
  });

  it('do not fit: the numbers, and what to do', () => {
    const refusal = sizingRefusal(
      '127.0.0.1:5432',
      room,
      { id: 1, workers: 9, maxCronThreads: 1 },
      [{ id: 2, workers: 5, maxCronThreads: 1 }],
      1,
    );
    expect(refusal).toBe(
      'PostgreSQL at 127.0.0.1:5432 allows 100 connections (3 reserved for superusers, 20 kept for svc: 77 for Odoo hosts); ' +
        'root server 1 would need up to 52 (9 workers + 1 cron × 4 + gevent 8 + 1 update(s) × 4), ' +
        'the other Odoo hosts using it 36 (root server 2: 36): 88 > 77. ' +
        'Raise max_connections on that server, give this host fewer workers or cron threads, lower tenants_per_host, or use another PostgreSQL server; nothing was changed',
    );
  });
});
