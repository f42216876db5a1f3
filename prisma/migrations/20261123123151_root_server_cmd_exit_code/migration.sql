-- AlterTable
ALTER TABLE "root_servers" ADD COLUMN     "cmd_exit_code" INTEGER;
