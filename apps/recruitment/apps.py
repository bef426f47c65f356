from django.apps import AppConfig


class RecruitmentConfig(AppConfig):
    name = "apps.recruitment"
    label = "recruitment"
    verbose_name = "Recruitment of participants"
