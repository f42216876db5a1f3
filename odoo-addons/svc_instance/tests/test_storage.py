import base64

from odoo.exceptions import UserError
from odoo.tests import tagged

from .common import SvcCase

GIB = 1024 ** 3
DATA = base64.b64encode(b"hello svc").decode()
# A 1x1 PNG.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@tagged("post_install", "-at_install", "svc_instance")
class TestStorageLimit(SvcCase):
    def assertStored(self, attachment, content=b"hello svc"):
        """The attachment was created and holds its content."""
        self.assertTrue(attachment.exists())
        self.assertEqual(base64.b64decode(attachment.datas), content)

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
        # Links take no storage.
        link = Attachment.create({"name": "link", "type": "url", "url": "https://example.com/x"})
        self.assertEqual((link.exists().type, link.url), ("url", "https://example.com/x"))
        kept.unlink()
        self.assertFalse(kept.exists())
        # A new user stores its generated avatar (a field's image): records are the other limits' to govern.
        user = self.Users.create(self.user_vals("svc-full-storage"))
        self.assertTrue(user.partner_id.image_1920)

    def test_exemptions_are_not_taken_from_the_callers_values(self):
        Attachment = self.env["ir.attachment"]
        partner = self.env["res.partner"].create({"name": "svc forged", "image_1920": PNG})
        picture = Attachment.sudo().search(
            [("res_model", "=", "res.partner"), ("res_field", "=", "image_1920"), ("res_id", "=", partner.id)]
        )
        self.assertEqual(len(picture), 1)
        plain = Attachment.create({"name": "plain.txt", "datas": DATA})
        self.set_svc(storage_limit_gb=1, storage_used_bytes=GIB)
        for forged in (
            # A real image field of a real model, but written as an attachment by the caller.
            {"res_model": "res.partner", "res_field": "image_1920", "res_id": partner.id},
            {"res_model": "res.partner", "res_field": "name", "res_id": partner.id},
            {"res_model": "svc.nothing", "res_field": "image_1920", "res_id": 1},
            {"url": "/web/assets/1/web.assets_x.min.js", "res_model": "ir.ui.view"},
            {"url": "/web/assets/1/web.assets_x.min.js"},
            {"res_model": "ir.ui.view"},
        ):
            with self.subTest(forged=forged), self.assertRaises(UserError) as caught:
                Attachment.create({"name": "big.bin", "datas": DATA, **forged})
            self.assertIn("Storage is full", str(caught.exception))
        # Nor new content written into an attachment directly, whatever it is or is made to say.
        with self.assertRaises(UserError):
            picture.write({"datas": DATA})
        with self.assertRaises(UserError):
            plain.write({"datas": DATA, "url": "/web/assets/1/x.js", "res_model": "ir.ui.view"})
        self.assertEqual(base64.b64decode(plain.datas), b"hello svc")

    def test_what_odoo_itself_stores_is_stored_while_full(self):
        Attachment = self.env["ir.attachment"].sudo()
        self.set_svc(storage_limit_gb=1, storage_used_bytes=GIB)
        # A record's picture through its field (Odoo resizes raster images).
        partner = self.env["res.partner"].create({"name": "svc picture"})
        partner.image_1920 = PNG
        self.assertTrue(partner.image_1920)
        # But not an image the size of a file store: SVG is stored as sent.
        with self.assertRaises(UserError):
            svg = b"<svg xmlns='http://www.w3.org/2000/svg'>" + b" " * (11 * 1024 * 1024) + b"</svg>"
            partner.image_1920 = base64.b64encode(svg)
        # A web asset bundle compiled by Odoo.
        pattern = "/web/assets/%/web.assets_emoji%"
        Attachment.search([("url", "=like", pattern)]).unlink()
        bundle = self.env["ir.qweb"]._get_asset_bundle("web.assets_emoji", css=False, js=True)
        self.assertTrue(bundle.js())
        self.assertTrue(Attachment.search([("url", "=like", pattern), ("res_model", "=", "ir.ui.view")]))

    def test_under_the_limit_or_unmeasured_files_are_stored(self):
        Attachment = self.env["ir.attachment"]
        self.set_svc(storage_limit_gb=1, storage_used_bytes=GIB - 1)
        self.assertStored(Attachment.create({"name": "a.txt", "datas": DATA}))
        self.set_svc(storage_used_bytes=None)
        self.assertStored(Attachment.create({"name": "b.txt", "datas": DATA}))
        self.set_svc(storage_limit_gb=0, storage_used_bytes=5 * GIB)
        self.assertStored(Attachment.create({"name": "c.txt", "datas": DATA}))
        self.set_svc(storage_limit_gb="x", storage_used_bytes=5 * GIB)
        with self.assertLogs("odoo.addons.svc_instance.models.svc_params", "WARNING") as logs:
            self.assertStored(Attachment.create({"name": "d.txt", "datas": DATA}))
        self.assertIn("svc.storage_limit_gb", logs.output[0])
        # The same files are refused once the limit is readable and reached.
        self.set_svc(storage_limit_gb=1, storage_used_bytes=GIB)
        with self.assertRaises(UserError):
            Attachment.create({"name": "e.txt", "datas": DATA})
