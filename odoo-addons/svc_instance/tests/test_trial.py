from datetime import datetime

from odoo.tests import tagged

from ..models.ir_http import trial_info
from .common import SvcCase


@tagged("post_install", "-at_install", "svc_instance")
class TestTrialEnd(SvcCase):
    def params(self, **kw):
        base = {"svc.is_trial": "True", "svc.trial_end_date": "2026-12-10 02:00:00"}
        base.update(kw)
        return {k: v for k, v in base.items() if v is not None}

    def test_days_left_and_date_in_the_users_language_and_time_zone(self):
        user = self.env.ref("base.user_admin")
        user.tz = "UTC"
        info = trial_info(self.env(user=user), self.params(), now=datetime(2026, 12, 7, 12, 0))
        self.assertEqual(info["days_left"], 3)
        self.assertEqual(info["label"], "Trial: 3 days left")
        self.assertIn("December 10, 2026", info["end_date"])
        # 02:00 UTC on the 10th is still the 9th in New York.
        user.tz = "America/New_York"
        info = trial_info(self.env(user=user), self.params(), now=datetime(2026, 12, 7, 12, 0))
        self.assertEqual(info["days_left"], 2)
        self.assertIn("December 9, 2026", info["end_date"])
        self.env["res.lang"]._activate_lang("fr_FR")
        user.lang = "fr_FR"
        info = trial_info(self.env(user=user), self.params(), now=datetime(2026, 12, 7, 12, 0))
        self.assertIn("décembre", info["end_date"])

    def test_the_badge_says_one_day_today_and_ended_in_words_of_their_own(self):
        env = self.env(user=self.env.ref("base.user_admin"))
        env.user.tz = "UTC"
        at = {  # now -> (label, title)
            datetime(2026, 12, 9, 12, 0): ("Trial: 1 day left", "Your trial ends on December 10, 2026."),
            datetime(2026, 12, 10, 1, 0): ("Trial ends today", "Your trial ends on December 10, 2026."),
            datetime(2026, 12, 10, 3, 0): ("Trial ended", "Your trial ended on December 10, 2026."),
            datetime(2026, 11, 30, 0, 0): ("Trial: 10 days left", "Your trial ends on December 10, 2026."),
        }
        for now, (label, title) in at.items():
            info = trial_info(env, self.params(), now=now)
            self.assertEqual((info["label"], info["title"]), (label, title), now)

    def test_ended_paid_or_unreadable_trials(self):
        env = self.env(user=self.env.ref("base.user_admin"))
        ended = trial_info(env, self.params(), now=datetime(2026, 12, 11))
        self.assertTrue(ended["ended"])
        self.assertEqual(ended["days_left"], 0)
        self.assertIsNone(trial_info(env, self.params(**{"svc.is_trial": "False"})))
        self.assertIsNone(trial_info(env, self.params(**{"svc.trial_end_date": None})))
        with self.assertLogs("odoo.addons.svc_instance.models.svc_params", "WARNING"):
            self.assertIsNone(trial_info(env, self.params(**{"svc.trial_end_date": "soon"})))
