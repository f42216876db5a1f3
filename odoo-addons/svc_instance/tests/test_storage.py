import base64

from odoo.exceptions import UserError
from odoo.tests import tagged

from .common import SvcCase

GIB = 1024 ** 3
DATA = base64.b64encode(b"hello svc").decode()


@tagged("post_install", "-at_install", "svc_instance")
class TestStorageLimit(SvcCase):
    def test_full_storage_refuses_new_files_but_reads_and_deletes(self):
        Attachment = self.env["ir.attachment"]
        kept = Attachment.create({"name": "kept.txt", "datas": DATA})
        self.set_svc(storage_limit_gb=1, storage_used_bytes=GIB)  # at the limit
        with self.assertRaises(UserError) as caught:
            Attachment.create({"name": "new.txt", "datas": DATA})
        self.assertIn("Storage is full", str(caught.exception))
        self.assertIn("1 GB", str(caught.exception))
        with self.assertRaises(UserError):
            kept.write({"datas": base64.b64encode(b"more").decode()})
        self.assertEqual(base64.b64decode(kept.datas), b"hello svc")
        # Links take no storage; Odoo's compiled assets must always be stored.
        Attachment.create({"name": "link", "type": "url", "url": "https://example.com/x"})
        Attachment.create({"name": "web.assets_x.min.js", "raw": b"1;", "res_model": "ir.ui.view", "url": "/web/assets/1/x.min.js"})
        kept.unlink()
        self.assertFalse(kept.exists())
        # A new user stores its generated avatar (a field's image): records are the other limits' to govern.
        user = self.Users.create(self.user_vals("svc-full-storage"))
        self.assertTrue(user.partner_id.image_1920)

    def test_under_the_limit_or_unmeasured_files_are_stored(self):
        Attachment = self.env["ir.attachment"]
        self.set_svc(storage_limit_gb=1, storage_used_bytes=GIB - 1)
        Attachment.create({"name": "a.txt", "datas": DATA})
        self.set_svc(storage_used_bytes=None)
        Attachment.create({"name": "b.txt", "datas": DATA})
        self.set_svc(storage_limit_gb=0, storage_used_bytes=5 * GIB)
        Attachment.create({"name": "c.txt", "datas": DATA})
        self.set_svc(storage_limit_gb="x", storage_used_bytes=5 * GIB)
        with self.assertLogs("odoo.addons.svc_instance.models.svc_params", "WARNING"):
            Attachment.create({"name": "d.txt", "datas": DATA})
