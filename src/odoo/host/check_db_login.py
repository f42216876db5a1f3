"""Checks that Odoo's role can sign in to PostgreSQL with what the configuration says, from this host.

Argument: the configuration file (root's to read: it holds the password, which is never printed).
Exit code 3 with the reason on stderr when it cannot.
"""
import configparser
import sys

import psycopg2


def main(argv):
    parser = configparser.RawConfigParser()
    parser.read(argv[1])
    o = dict(parser.items("options"))
    try:
        conn = psycopg2.connect(
            host=o["db_host"],
            port=int(o["db_port"]),
            user=o["db_user"],
            password=o["db_password"],
            dbname="postgres",
            connect_timeout=10,
        )
        conn.close()
    except Exception as e:  # pylint: disable=broad-exception-caught  # whatever it is, the reason is told
        print(f"Odoo's role {o['db_user']} cannot sign in to PostgreSQL at {o['db_host']}:{o['db_port']} "
              f"from this host: {str(e).strip()}", file=sys.stderr)
        return 3
    print(f"role {o['db_user']} signs in at {o['db_host']}:{o['db_port']}")
    return 0


sys.exit(main(sys.argv))
