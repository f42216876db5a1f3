/** @odoo-module **/
// The trial's days left in the web client's systray (Odoo 18.0 and 19.0): the text and the end
// date come from session_info, formatted by the server in the user's language and time zone.
import { Component } from "@odoo/owl";
import { registry } from "@web/core/registry";
import { session } from "@web/session";

export class SvcTrialSystray extends Component {
    static template = "svc_instance.TrialSystray";
    static props = {};

    setup() {
        this.trial = session.svc_trial;
    }
}

registry.category("systray").add(
    "svc_instance.trial",
    { Component: SvcTrialSystray, isDisplayed: () => Boolean(session.svc_trial) },
    { sequence: 1 }
);
